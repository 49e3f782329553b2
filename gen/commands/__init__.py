"""The ``dlforge`` command's subcommands, one module per family of commands.

Naming, decided once (issue 39): a module is named by the family it adds, a plural or
collective noun for the things it works on, never ``*_command(s)``: ``blocks`` (``gen``,
``sim`` and ``synth`` of a registered block), ``bench`` (``bench BENCH``, one subcommand per
bench), ``runtime`` (``decode``, ``conv``, ``stream``, ``sim-board``: work through a device),
``infer``, ``boards`` (``build``, ``program``) and ``axi`` (``export-axi``).  Each has one
``add_commands(sub)`` that registers its commands on the ``dlforge`` subparsers ``sub``; the
command functions are ``cmd_<command>`` (``cmd_bench_<bench>`` where a bench needs its own).
:mod:`dlforge.gen.cli` only assembles the families and runs ``main()``; options that more than
one family takes are defined once in :mod:`.options`.  What a command computes lives outside
this package (:mod:`dlforge.gen.verilog`, :mod:`dlforge.gen.axi_export`, ``gen/bench/``, the
host runtime), so a module here is the command line and its printing only.
"""
