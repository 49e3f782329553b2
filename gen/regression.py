"""Run a block's cocotb regression over its parameter sets and summarise what was verified."""

from dlforge.sim.tools.runner import default_simulator, run_cocotb
from .blocks import get_block

__all__ = ["run_regression"]


def run_regression(block_name, *, sim=None, waves=False, param_sets=None, quiet=True,
                   **tb_options):
    """Simulate every parameter set; return a list of rows (parameters, pass/fail, metrics)."""
    block = get_block(block_name)
    sim = sim or default_simulator()
    rows = []
    for params in param_sets or block.regression or (block.defaults(),):
        params = block.full_params(params)
        component = block.build(**params)
        result = run_cocotb(component, name=block.module_name(params), test_module=block.testbench,
                            params=block.tb_params(component, **tb_options), sim=sim, waves=waves,
                            quiet=quiet, cxx_opt=block.cxx_opt)
        rows.append({"block": block.name, "sim": sim, "parameters": params,
                     "tests": result.tests, "failures": result.failures, "passed": result.passed,
                     "metrics": result.metrics, "log_dir": str(result.test_dir),
                     "waves": str(result.waves) if result.waves else None})
    return rows
