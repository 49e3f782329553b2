"""The Verilog top of the simulated board: the Amaranth top with its inputs registered, so that
Verilator evaluates the design once a clock (the numbers below), and the UART build's top."""

__all__ = ["TOP_NAME", "WRAPPER_NAME", "WRAPPER", "UART_WRAPPER", "board_wrapper"]

TOP_NAME = "dlforge_top"
WRAPPER_NAME = "dlforge_board"


#: The Verilog top of the build: the Amaranth top with every input taken from a register.
#: Verilator evaluates the combinational logic that depends on top-level inputs in its input
#: region, on both evaluations of every clock cycle; logic fed by registers only once, after
#: the clock edge.  Amaranth's Verilog folds the synchronous reset into the next-state logic
#: of every register, so ``rst`` as a top-level input put nearly all of the design in the
#: input region: registered, 1.8 times the cycles per second.  The stream ports go through
#: two-entry queues (``valid`` and ``ready`` both come from registers, a beat per clock each
#: way): 8 % more.  The harness (``Vdlforge_top``) sees the same ports; the reset takes effect
#: a cycle later, and each direction has two cycles more latency.
def _stream_wrapper(w, gated_engine=False):
    """The wrapper of a link of ``w`` bytes a clock (``gated_engine``: the top's engine runs on
    a gated copy of the clock, which ticks while the top says the engine may need it;
    :class:`~dlforge.rtl.top.AcceleratorTop`'s ``engine_clock``)."""
    gate = ""
    ports = ""
    if gated_engine:
        # The enable is taken on the falling edge, so it is steady when the clock rises, and
        # both clocks' flip-flops take the same rising edge (Verilator orders a clock that
        # logic derives from another before the edge's non-blocking updates).
        gate = """
  wire wants_clock;
  reg engine_on = 1'b1;
  always @(negedge clk) engine_on <= wants_clock | rst_q;
  wire engine_clk = clk & engine_on;"""
        ports = ", .engine_clk(engine_clk), .engine_wants_clock(wants_clock)"
    top = f"""\
// The simulated board's top: {TOP_NAME} behind registers on every input (see sim/board/sim_board.py).
module {WRAPPER_NAME}(clk, rst, i__valid, i__ready, i__payload, o__valid, o__ready, o__payload);
  input clk;
  input rst;
  input i__valid;
  output i__ready;
  input [{8 * w - 1}:0] i__payload;
  output o__valid;
  input o__ready;
  output [{8 * w - 1}:0] o__payload;
  reg rst_q = 1'b1;
  // two-entry queues each way: the top's inputs all come from registers
  reg [{8 * w - 1}:0] in0 = {8 * w}'d0, in1 = {8 * w}'d0, out0 = {8 * w}'d0, out1 = {8 * w}'d0;
  reg [1:0] in_n = 2'd0, out_n = 2'd0;
  wire t_i_ready, t_o_valid;
  wire [{8 * w - 1}:0] t_o_payload;
  assign i__ready = in_n != 2'd2;
  assign o__valid = out_n != 2'd0;
  assign o__payload = out0;
  wire t_i_valid = in_n != 2'd0;
  wire t_o_ready = out_n != 2'd2;
  wire push_in = i__valid && i__ready, pop_in = t_i_valid && t_i_ready;
  wire push_out = t_o_valid && t_o_ready, pop_out = o__valid && o__ready;
  always @(posedge clk) begin
    rst_q <= rst;
    if (rst_q) begin
      in_n <= 2'd0;
      out_n <= 2'd0;
    end else begin
      // input queue: in0 is the head
      if (pop_in) begin
        in0 <= (in_n == 2'd2) ? in1 : i__payload;
        if (in_n == 2'd2 && push_in) in1 <= i__payload;
      end else if (push_in) begin
        if (in_n == 2'd0) in0 <= i__payload; else in1 <= i__payload;
      end
      in_n <= in_n + {{1'b0, push_in}} - {{1'b0, pop_in}};
      if (pop_out) begin
        out0 <= (out_n == 2'd2) ? out1 : t_o_payload;
        if (out_n == 2'd2 && push_out) out1 <= t_o_payload;
      end else if (push_out) begin
        if (out_n == 2'd0) out0 <= t_o_payload; else out1 <= t_o_payload;
      end
      out_n <= out_n + {{1'b0, push_out}} - {{1'b0, pop_out}};
    end
  end{gate}
  {TOP_NAME} top (.clk(clk), .rst(rst_q), .i__valid(t_i_valid), .i__ready(t_i_ready),
           .i__payload(in0), .o__valid(t_o_valid), .o__ready(t_o_ready),
           .o__payload(t_o_payload){ports});
endmodule
"""
    return top


WRAPPER = _stream_wrapper(1)

#: The Verilog top of a UART build (``build_board(uart=N)``): :class:`UartAccelerator`'s pins
#: (the host link's two wires, and the UART's counters for the statistics), with the reset
#: registered for the same reason.  The harness is compiled with ``DLFORGE_UART_DIVISOR=N``
#: (and ``DLFORGE_BAUD``, the bit rate the clock's cycles are counted against).
UART_WRAPPER = f"""\
// The simulated UART board's top: {TOP_NAME} (UartAccelerator) with its reset registered.
module {WRAPPER_NAME}(clk, rst, rx, tx, got, sent, framing_errors, overruns);
  input clk;
  input rst;
  input rx;
  output tx;
  output got;
  output sent;
  output [15:0] framing_errors;
  output [15:0] overruns;
  reg rst_q = 1'b1;
  always @(posedge clk) rst_q <= rst;
  {TOP_NAME} top (.clk(clk), .rst(rst_q), .rx(rx), .tx(tx), .got(got), .sent(sent),
                  .framing_errors(framing_errors), .overruns(overruns));
endmodule
"""


def board_wrapper(params):
    """The wrapper of a build with these parameters."""
    if params.get("uart"):
        return UART_WRAPPER
    return _stream_wrapper(params.get("link_bytes", 1), bool(params.get("conv")))
