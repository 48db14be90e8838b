// ming_widths.h -- integers of exact widths, for the registers of the generated processes (ming_stream.h) and
// the datapath functions of the numeric contract (ming_numerics.h), which both include it.
//
//   ming::uint_for<MAX>     holds 0 .. MAX                ap_uint<unsigned_bits(MAX)> under Vitis
//   ming::int_for<LO, HI>   holds LO .. HI (two's complement)  ap_int<signed_bits(LO, HI)> under Vitis
//   ming::Counter<MAX>      holds 0 .. MAX                uint_for<MAX>, or for MAX = 0 the constant 0 (no register)
//
// Every variable of a datapath function is declared at the width of its value range over the function's
// documented domain, from named constexpr bounds, so that synthesis builds each operator at that width (an
// int64_t sum is a 64-bit adder in hardware, whatever values it carries).
//
// Under MING_CSIM (`ming csim`, the tests) the two are checked classes: a value outside the width ends the
// simulation with one line naming the function and the declaration's line (a width derived too narrow, or an
// argument outside the documented domain) instead of wrapping around as ap_int would. Their arithmetic is that of
// long long (every width here is at most 63 bits); the result is checked when it is stored. Compiled with
// -DMING_CHECK_WIDTHS too, the simulation reports at exit, per declaration, the least and greatest value held
// (ming::WidthReport), so that a test can compare each width with the range it needed.
#ifndef MING_WIDTHS_H
#define MING_WIDTHS_H

#include <cstdint>
#ifdef MING_CSIM
#include <cstdio>
#include <cstdlib>
#ifdef MING_CHECK_WIDTHS
#include <map>
#include <mutex>
#include <string>
#include <utility>
#endif
#else
#include <ap_int.h>
#endif

namespace ming {

// Bits of the magnitude of a non-negative value (0 -> 0).
constexpr int magnitude_bits(long long value) { return value == 0 ? 0 : 1 + magnitude_bits(value / 2); }
// Bits of an unsigned register holding 0 .. max (at least one).
constexpr int unsigned_bits(long long max) { return max < 2 ? 1 : magnitude_bits(max); }
// Bits of a two's complement register holding lo .. hi: a sign bit and the magnitude of the farther end
// (-v - 1 for a negative one: -2^k needs k + 1 bits).
constexpr int signed_bits(long long lo, long long hi) {
    return 1 + (magnitude_bits(lo < 0 ? -(lo + 1) : lo) > magnitude_bits(hi < 0 ? -(hi + 1) : hi)
                    ? magnitude_bits(lo < 0 ? -(lo + 1) : lo)
                    : magnitude_bits(hi < 0 ? -(hi + 1) : hi));
}

#ifdef MING_CSIM
#ifdef MING_CHECK_WIDTHS
// The values each declared variable held, by declaration line: compiled with -DMING_CHECK_WIDTHS, the
// C-simulation prints at exit one line per line of a declaration,
//   ming widths: <function> <line> <bits> <least value> <greatest value>
// so that a test can compare every register's width with the range it needed.
class WidthReport {
 public:
  static WidthReport& instance() {
    static WidthReport report;
    return report;
  }
  // Called by every checked variable that goes out of scope, the datapath functions' too: keyed by the function
  // name's address (a string literal of __builtin_FUNCTION), merged by name at exit.
  void note(const char* function, int line, int bits, long long low, long long high) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto key = std::make_pair(function, line);
    const auto found = ranges_.find(key);
    if (found == ranges_.end()) {
      ranges_[key] = Range{bits, low, high};
    } else {
      found->second.low = low < found->second.low ? low : found->second.low;
      found->second.high = high > found->second.high ? high : found->second.high;
    }
  }
  ~WidthReport() {
    std::map<std::pair<int, std::string>, Range> merged;
    for (const auto& entry : ranges_) {
      const auto key = std::make_pair(entry.first.second, std::string(entry.first.first));
      const auto found = merged.find(key);
      if (found == merged.end()) {
        merged[key] = entry.second;
      } else {
        found->second.low = entry.second.low < found->second.low ? entry.second.low : found->second.low;
        found->second.high = entry.second.high > found->second.high ? entry.second.high : found->second.high;
      }
    }
    for (const auto& entry : merged) {
      std::fprintf(stderr, "ming widths: %s %d %d %lld %lld\n", entry.first.second.c_str(), entry.first.first,
                   entry.second.bits, entry.second.low, entry.second.high);
    }
  }

 private:
  struct Range {
    int bits;
    long long low, high;
  };
  std::mutex mutex_;
  std::map<std::pair<const char*, int>, Range> ranges_;
};
#endif

// ap_uint<W> (Signed false) or ap_int<W> (Signed true) as `ming csim` simulates it: a value outside W bits ends
// the simulation (a register declared too narrow, or an argument outside a function's domain) instead of
// wrapping around.
template <int W, bool Signed>
class Checked {
 public:
  static_assert(W >= 1 && W <= 63, "a register of 1 to 63 bits");
  static constexpr int width = W;  // as ap_int's
  static constexpr long long kHigh = Signed ? (1LL << (W - 1)) - 1 : (W == 63 ? 0x7FFFFFFFFFFFFFFFLL : (1LL << (W % 63)) - 1);
  static constexpr long long kLow = Signed ? -kHigh - 1 : 0;

  // Declared as `ming::uint_for<MAX> name = value;` the variable knows where it is declared.
  Checked(long long value = 0, const char* function = __builtin_FUNCTION(), int line = __builtin_LINE())  // NOLINT
      : function_(function), line_(line) {
    set(value);
  }
  Checked(const Checked& other) : function_(other.function_), line_(0) { set(other.value_); }
  // from another width, or anything an integer converts from (a ROM word the port check reads), as ap_int
  // converts (checked against this one's width)
  template <typename Integer>
  Checked(const Integer& value, const char* function = __builtin_FUNCTION(),  // NOLINT
          int line = __builtin_LINE())
      : function_(function), line_(line) {
    set(static_cast<long long>(value));
  }
  Checked& operator=(const Checked& other) {
    set(other.value_);
    return *this;
  }
  template <typename Integer>
  Checked& operator=(const Integer& value) {
    set(static_cast<long long>(value));
    return *this;
  }
#ifdef MING_CHECK_WIDTHS
  ~Checked() {
    if (line_ != 0) WidthReport::instance().note(function_, line_, W, low_, high_);
  }
#endif

  operator long long() const { return value_; }  // NOLINT: converts like ap_int
  Checked& operator++() { return *this = value_ + 1; }
  Checked operator++(int) {
    const Checked old = *this;
    *this = value_ + 1;
    return old;
  }
  Checked& operator+=(long long step) { return *this = value_ + step; }

 private:
  void set(long long value) {
    if (value < kLow || value > kHigh) {
      std::fprintf(stderr, "ming csim: %s: %lld does not fit the %s<%d> declared at line %d\n", function_, value,
                   Signed ? "ap_int" : "ap_uint", W, line_);
      std::fflush(stderr);
      std::abort();
    }
    value_ = value;
#ifdef MING_CHECK_WIDTHS
    low_ = value < low_ ? value : low_;
    high_ = value > high_ ? value : high_;
#endif
  }

  long long value_ = 0;
  const char* function_;
  int line_;  // of the declaration; 0 for a copy
#ifdef MING_CHECK_WIDTHS
  long long low_ = kHigh, high_ = kLow;  // the values it held
#endif
};

template <int W>
using UInt = Checked<W, false>;
template <int W>
using Int = Checked<W, true>;
#else
template <int W>
using UInt = ap_uint<W>;
template <int W>
using Int = ap_int<W>;
#endif

// Whether an exact-width type is signed (Int) or not (UInt).
template <typename T>
struct IsSigned;
template <int W>
struct IsSigned<Int<W>> {
  static constexpr bool value = true;
};
template <int W>
struct IsSigned<UInt<W>> {
  static constexpr bool value = false;
};

// The low W bits of an integer as a two's complement number: ap_int<W>'s truncation, which `ming csim` computes
// without the checked class's range check (where the contract wraps, as TOSA's int32 sums do).
template <int W, typename Integer>
inline Int<W> wrap_to(const Integer& value) {
#ifdef MING_CSIM
  static_assert(W >= 1 && W <= 63, "1 to 63 bits");
  const unsigned long long low = static_cast<unsigned long long>(static_cast<long long>(value)) &
                                 ((1ULL << W) - 1), sign = 1ULL << (W - 1);
  return Int<W>(low >= sign ? -static_cast<long long>((1ULL << W) - low) : static_cast<long long>(low));
#else
  return Int<W>(value);
#endif
}

template <long long MAX>
using uint_for = UInt<unsigned_bits(MAX)>;
template <long long LO, long long HI>
using int_for = Int<signed_bits(LO, HI)>;

// A counter whose range is 0 .. 0: the constant 0, not a register. It takes the updates a counter of a wider range
// would (`c++`, `c = 0`, `c += step`) so that one piece of code serves every range; under Vitis they are no-ops
// that synthesis folds away, and `ming csim` ends the simulation if one would make it anything but 0. Compiled
// with -DMING_CHECK_WIDTHS it is reported at 0 bits, so that a test can tell it from a register.
class Zero {
 public:
  static constexpr int width = 0;  // as ap_int's
#ifdef MING_CSIM
  Zero(long long value = 0, const char* function = __builtin_FUNCTION(), int line = __builtin_LINE())  // NOLINT
      : function_(function), line_(line) {
    check(value);
  }
  Zero(const Zero& other) : function_(other.function_), line_(0) {}
  Zero& operator=(const Zero&) { return *this; }
#ifdef MING_CHECK_WIDTHS
  ~Zero() {
    if (line_ != 0) WidthReport::instance().note(function_, line_, 0, 0, 0);
  }
#endif
  Zero& operator=(long long value) {
    check(value);
    return *this;
  }
  Zero& operator++() { return *this = 1; }
  Zero operator++(int) {
    *this = 1;
    return *this;
  }
  Zero& operator+=(long long step) { return *this = step; }
#else
  constexpr Zero(long long = 0) {}  // NOLINT
  Zero& operator=(long long) { return *this; }
  Zero& operator++() { return *this; }
  Zero operator++(int) { return *this; }
  Zero& operator+=(long long) { return *this; }
#endif
  constexpr operator int() const { return 0; }  // NOLINT: reads as the integer 0

#ifdef MING_CSIM
 private:
  void check(long long value) const {
    if (value != 0) {
      std::fprintf(stderr, "ming csim: %s: %lld does not fit the constant 0 declared at line %d\n", function_, value,
                   line_);
      std::fflush(stderr);
      std::abort();
    }
  }

  const char* function_;
  int line_;  // of the declaration; 0 for a copy
#endif
};

template <long long MAX>
struct CounterOf {
  using type = uint_for<MAX>;
};
template <>
struct CounterOf<0> {
  using type = Zero;
};
// A counter of 0 .. MAX: the register of its width (uint_for), or for MAX = 0 the constant 0 (Zero).
template <long long MAX>
using Counter = typename CounterOf<MAX>::type;

// The word of a constant table whose values lie in LO .. HI (rom_int) or 0 .. MAX (rom_uint): ap_int / ap_uint
// of their width under Vitis, so the ROM is as wide as its values; a plain integer in C-simulation (the compiler
// wrote the values: in range by construction).
#ifdef MING_CSIM
template <long long LO, long long HI>
using rom_int = long long;
template <long long MAX>
using rom_uint = long long;
#else
template <long long LO, long long HI>
using rom_int = ap_int<signed_bits(LO, HI)>;
template <long long MAX>
using rom_uint = ap_uint<unsigned_bits(MAX)>;
#endif

}  // namespace ming

#endif  // MING_WIDTHS_H
