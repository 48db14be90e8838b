// ming_window.h -- the position machine of a sliding-window process (conv, depthwise conv, pools: the template
// emit/templates/process/window.cpp.j2, the loop of ming_py/kinds/window.py): which padded input position the
// loop's iteration is at, whether a pixel's token arrives and which, whether the window ending at the previous
// position is computed and which k tile of it, and the line buffer rows they are in.
//
// The loop visits every padded position (pr, pc) in row-major order and one more (pr = PADDED_H) after the map's
// last. A position takes TOKENS_IN iterations when a pixel arrives there, FOLD when a window ends at the previous
// position (its fold steps, the pixel's reads READ_SPACING apart among them), and one otherwise. Counters stand in
// for every division: the line buffer row of padded row pr, the stride phase of pr and pc, the k tile's offset in
// the window.
//
// Every member is a register of the loop: a bool, or a ming::Counter at the width of its range (the constant 0
// where the range is 0 .. 0); ming_py/kinds/window.py `SlidingWindow.counters` names the same registers with
// their greatest values, which the cost model charges. `next()` computes every register's next value from this
// iteration's registers alone (one add, one compare, one boolean combination and one select deep: the next
// position's predicates compare pr and pc with the constants one position further), so the loop keeps II=1.
// The datapath reads the members; only `next()`, called once at the end of each iteration, writes them.
//
// C-simulation (MING_CSIM) passes the process function's name to the registers, each keyed by its line here
// negated, so that the width report (ming_widths.h, -DMING_CHECK_WIDTHS) names each process's own cursor.
#ifndef MING_WINDOW_H
#define MING_WINDOW_H

#include "ming_widths.h"

#ifdef MING_CSIM
#define MING_CURSOR_REGISTER(value) (value), where, -__LINE__
#else
#define MING_CURSOR_REGISTER(value) (value)
#endif

namespace ming {

// The template parameters are the process's constexprs: its map (H_IN x W_IN in, H_OUT x W_OUT out), kernel,
// stride, dilation and top/left pads, its padded map, the line buffer's ROWS and LAST_TOP_SLOT (the greatest
// line buffer row a window's first row is in), a k tile's UNROLL_KH x UNROLL_KW window elements, a pixel's
// TOKENS_IN, the FOLD iterations of an output position, and HOLDS_LAST: whether the position after the map's
// last may take more than one loop iteration (a map one column wide, or shared requantizers' last turns), so
// that pr stays at PADDED_H.
template <int H_IN, int W_IN, int H_OUT, int W_OUT, int K_H, int K_W, int S_H, int S_W, int D_H, int D_W,
          int PAD_TOP, int PAD_LEFT, int PADDED_H, int PADDED_W, int ROWS, int LAST_TOP_SLOT, int UNROLL_KH,
          int UNROLL_KW, int TOKENS_IN, int FOLD, bool HOLDS_LAST>
class WindowCursor {
 public:
  static constexpr int SPAN_H = (K_H - 1) * D_H, SPAN_W = (K_W - 1) * D_W;  // a window's last element from its first
  static constexpr int LAST_ROW_OFFSET = (K_H - UNROLL_KH) * D_H, LAST_COL_OFFSET = (K_W - UNROLL_KW) * D_W;
  static constexpr int READ_SPACING = FOLD / TOKENS_IN;  // a pixel's tokens spread over an output position
  // At pr = 0 and pc = 0: (pr - PAD_TOP) mod ROWS, (pr - SPAN_H) mod S_H, (pc - SPAN_W) mod S_W.
  static constexpr int FIRST_ROW_SLOT = (ROWS - PAD_TOP % ROWS) % ROWS;
  static constexpr int FIRST_ROW_PHASE = (S_H - SPAN_H % S_H) % S_H, FIRST_COL_PHASE = (S_W - SPAN_W % S_W) % S_W;

#ifdef MING_CSIM
  explicit WindowCursor(const char* where = __builtin_FUNCTION())
#else
  WindowCursor()
#endif
      : pr(MING_CURSOR_REGISTER(0)),
        pc(MING_CURSOR_REGISTER(0)),
        row_slot(MING_CURSOR_REGISTER(FIRST_ROW_SLOT)),
        row_phase(MING_CURSOR_REGISTER(FIRST_ROW_PHASE)),
        col_phase(MING_CURSOR_REGISTER(FIRST_COL_PHASE)),
        arrives(PAD_TOP == 0 && PAD_LEFT == 0),
        window(false),
        step(MING_CURSOR_REGISTER(0)),
        position_last(!arrives || TOKENS_IN == 1),
        read(arrives),
        token(MING_CURSOR_REGISTER(0)),
        gap(MING_CURSOR_REGISTER(0)),
        top(MING_CURSOR_REGISTER(0)),
        left(MING_CURSOR_REGISTER(0)),
        top_slot(MING_CURSOR_REGISTER(0)),
        row_offset(MING_CURSOR_REGISTER(0)),
        col_offset(MING_CURSOR_REGISTER(0)) {}

  // The padded position (pr, pc) and its line buffer row and stride phases.
  Counter<PADDED_H> pr;
  Counter<PADDED_W - 1> pc;
  Counter<ROWS - 1> row_slot;  // the line buffer row of padded row pr: (pr - PAD_TOP) mod ROWS
  Counter<S_H - 1> row_phase;  // (pr - SPAN_H) mod S_H
  Counter<S_W - 1> col_phase;  // (pc - SPAN_W) mod S_W
  bool arrives;  // a pixel arrives at the position
  bool window;  // the window ending at the previous position is computed during it
  // The iteration in the position.
  Counter<FOLD - 1> step;  // the fold step of a window
  bool position_last;  // the iteration ends the position
  bool read;  // the iteration reads a token of the pixel
  Counter<TOKENS_IN - 1> token;  // the token it reads
  Counter<READ_SPACING - 1> gap;  // iterations since the last read (READ_SPACING apart in a window)
  // The window: its first row and column (padded coordinates), the line buffer row of its first row, and the
  // k tile's first element from the window's.
  Counter<(H_OUT - 1) * S_H> top;
  Counter<(W_OUT - 1) * S_W> left;
  Counter<LAST_TOP_SLOT> top_slot;
  Counter<LAST_ROW_OFFSET> row_offset;
  Counter<LAST_COL_OFFSET> col_offset;

  // Every register's value at the next iteration.
  void next() {
#ifdef __SYNTHESIS__
#pragma HLS INLINE
#endif
    if (window) {  // the next k tile
      if (col_offset != LAST_COL_OFFSET) {
        col_offset += UNROLL_KW * D_W;
      } else {
        col_offset = 0;
        if (row_offset != LAST_ROW_OFFSET) {
          row_offset += UNROLL_KH * D_H;
        } else {
          row_offset = 0;
        }
      }
    }
    const bool spaced = !window || gap == READ_SPACING - 1;  // the position's next iteration may read
    if (read) {
      if (token != TOKENS_IN - 1) {
        token++;
      } else {
        token = 0;
      }
    }
    if (spaced) {
      gap = 0;
    } else {
      gap++;
    }
    // The next position, from this one: a window ends here, a pixel arrives there.
    const bool row_end = pc == PADDED_W - 1;
    const bool emits = pr >= SPAN_H && pr < SPAN_H + H_OUT * S_H && row_phase == 0 && pc >= SPAN_W &&
                       pc < SPAN_W + W_OUT * S_W && col_phase == 0;
    const bool next_arrives = (!row_end && pr >= PAD_TOP && pr < PAD_TOP + H_IN && pc >= PAD_LEFT - 1 &&
                               pc < PAD_LEFT + W_IN - 1) ||
                              (row_end && PAD_LEFT == 0 && pr >= PAD_TOP - 1 && pr < PAD_TOP + H_IN - 1);
    if (position_last) {
      arrives = next_arrives;
      window = emits;
      read = next_arrives;
      position_last = emits ? FOLD == 1 : !next_arrives || TOKENS_IN == 1;
      step = 0;
      if (emits) {
        top = pr - SPAN_H;
        left = pc - SPAN_W;
        if (row_slot >= SPAN_H) {
          top_slot = row_slot - SPAN_H;
        } else {
          top_slot = row_slot + ROWS - SPAN_H;
        }
      }
      if (row_end) {
        pc = 0;
        col_phase = FIRST_COL_PHASE;
        if (!HOLDS_LAST || pr != PADDED_H) {  // the position after the map's last has none after it
          pr++;
        }
        if (row_slot != ROWS - 1) {
          row_slot++;
        } else {
          row_slot = 0;
        }
        if (row_phase != S_H - 1) {
          row_phase++;
        } else {
          row_phase = 0;
        }
      } else {
        pc++;
        if (col_phase != S_W - 1) {
          col_phase++;
        } else {
          col_phase = 0;
        }
      }
    } else {
      read = arrives && spaced;
      position_last = window ? step == FOLD - 2 : step == TOKENS_IN - 2;
      step++;
    }
  }
};

}  // namespace ming

#undef MING_CURSOR_REGISTER

#endif  // MING_WINDOW_H
