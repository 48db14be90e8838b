// ming_numerics.h -- integer numeric contract of ming, C++ / Vitis HLS port.
//
// Every function is a 1:1 port of the numpy function of the same name in
// ming_py/numerics/ (the contract; see docs/numerics.md for the evidence against
// onnxruntime).  tests/test_cpp_numerics.py asserts bit equality with the Python
// functions on >= 200k random and edge-case inputs per function.
//
// Constraints (both g++ and Vitis HLS):
//   * only <cstdint> and ming_widths.h (Vitis's <ap_int.h> without MING_CSIM); integer-only; no floats, no dynamic
//     memory, no recursion, no compiler builtins, no loops (count-leading-zeros is a binary search of at most 6
//     steps);
//   * warning-free under -std=c++14/17/20 -Wall -Wextra -Wconversion -Wsign-conversion;
//   * exact widths: a function a process calls (from emit/templates/process/ and epilogues/) has no 64-bit type;
//     every value is a ming::int_for<LO, HI> / ming::uint_for<MAX> of the bounds of its range over the function's
//     documented domain, named in a struct of namespace ming::widths (a template over the process's constants where
//     they set the range), which the function's Verilog model in benchmarks/calibration/ takes
//     (tests/test_numerics_widths.py, tests/test_calibration_widths.py). Under MING_CSIM those are checked classes:
//     an argument outside the domain ends the simulation with one line instead of wrapping; their arithmetic is
//     g++'s on long long (a right shift of a negative value is arithmetic, as ap_int's);
//   * the functions no process calls (saturate, bit_length, round_shift_half_even/_up, fixed_point_rescale and their
//     detail helpers: the contract's primitives the tests compare) take int64 and have no undefined behaviour for
//     ANY argument values: left shifts and additions that can wrap are done in uint64_t (numpy's int64 arrays wrap
//     modulo 2^64 too), right shifts of negative values use an explicit floor shift, shift amounts are clamped to
//     [0, 63]. Outside the documented domains their results are well defined but not meaningful.
//
// Not here on purpose: gap_requant (numerics.gap_requant) is
//   requantize(window_sum - N * x_zp, mant, exp, y_zp)
// with (mant, exp) = numerics.float32_parts(numerics.ort_gap_multiplier(sx, sy, N))
// precomputed by the compiler; rescale (numerics.rescale) is
//   saturate(fixed_point_rescale(x - x_zp, M, s) + y_zp, qmin, qmax)
// and rescale_table is a 256-entry ROM built by the compiler.
#ifndef MING_NUMERICS_H
#define MING_NUMERICS_H

#include <cstdint>

#include "ming_widths.h"

namespace ming {

namespace detail {

// Two's complement reinterpretation uint64 -> int64 without relying on the
// implementation-defined out-of-range conversion of C++17.
inline int64_t u2s(uint64_t u) {
    if (u <= UINT64_C(0x7FFFFFFFFFFFFFFF)) return static_cast<int64_t>(u);
    return -static_cast<int64_t>(~u) - 1;  // ~u <= 2^63 - 1
}

inline uint64_t s2u(int64_t v) { return static_cast<uint64_t>(v); }  // well defined (mod 2^64)

// floor(v / 2^s) for 0 <= s <= 63 (arithmetic shift right, written portably).
inline int64_t floor_shift(int64_t v, int s) {
    if (v >= 0) return v >> s;
    return ~((~v) >> s);  // ~v = -1 - v >= 0
}

// (v << s) modulo 2^64, 0 <= s <= 63 (numpy int64 semantics; no UB for negative v).
inline int64_t wrap_shl(int64_t v, int s) { return u2s(s2u(v) << s); }

inline int64_t wrap_add(int64_t a, int64_t b) { return u2s(s2u(a) + s2u(b)); }
inline int64_t wrap_mul(int64_t a, int64_t b) { return u2s(s2u(a) * s2u(b)); }

}  // namespace detail

// numerics.saturate: clamp to [qmin, qmax] (the caller narrows the type).
inline int64_t saturate(int64_t v, int64_t qmin, int64_t qmax) {
    return v < qmin ? qmin : (v > qmax ? qmax : v);
}

// numerics.bit_length: number of significant bits (0 -> 0) = 64 - clz64(a).
// Same 6-step binary search as the numpy version; valid for the full uint64 range.
inline int bit_length(uint64_t a) {
    int n = 0;
    if (a >> 32) { n += 32; a >>= 32; }
    if (a >> 16) { n += 16; a >>= 16; }
    if (a >> 8) { n += 8; a >>= 8; }
    if (a >> 4) { n += 4; a >>= 4; }
    if (a >> 2) { n += 2; a >>= 2; }
    if (a >> 1) { n += 1; a >>= 1; }
    return n + (a != 0 ? 1 : 0);
}

// numerics.round_shift_half_even: rne(v / 2^shift).
//   shift == 0 -> v;  shift >= 63 -> 0 (as numpy);  1..62: exact for |v| <= 2^62 and
//   equal to numpy's (wrapping) int64 result for every other v.
//   shift < 0 is outside the contract (numpy raises); here it returns v.
inline int64_t round_shift_half_even(int64_t v, int shift) {
    if (shift <= 0) return v;
    if (shift >= 63) return 0;
    const int64_t q = detail::floor_shift(v, shift);
    const uint64_t mask = (UINT64_C(1) << shift) - 1u;
    const uint64_t r = detail::s2u(v) & mask;  // = v - (q << shift), in [0, 2^shift)
    const uint64_t half = UINT64_C(1) << (shift - 1);
    const bool up = (r > half) || (r == half && (q & 1) != 0);
    return q + (up ? 1 : 0);
}

// numerics.round_shift_half_up: floor(v / 2^shift + 1/2), contract 1 <= shift <= 62.
//   Computed as floor + (remainder >= half), which equals numpy's (v + 2^(shift-1)) >> shift
//   whenever that addition does not overflow and is exact for every int64 v.
//   shift <= 0 -> v;  shift >= 63 -> the exact value (0, or -1 for v < -2^62 at 63).
inline int64_t round_shift_half_up(int64_t v, int shift) {
    if (shift <= 0) return v;
    if (shift >= 64) return 0;
    const int64_t q = detail::floor_shift(v, shift);
    const uint64_t mask = (UINT64_C(1) << shift) - 1u;
    const uint64_t r = detail::s2u(v) & mask;
    const uint64_t half = UINT64_C(1) << (shift - 1);
    return q + (r >= half ? 1 : 0);
}

namespace detail {
// The helpers of the datapath functions, on exact-width values (ming_widths.h): each is written once for any width
// and instantiated at the widths of its caller's ranges.

// bit_length of an unsigned value of T::width bits (0 -> 0): a binary search of as many steps as the width needs.
template <typename T>
inline uint_for<T::width> bit_length_bits(T a) {
    static_assert(!IsSigned<T>::value, "a magnitude");
    uint_for<T::width> n = 0;
    T rest = a;
    if (T::width > 32 && (rest >> 32) != 0) { n = n + 32; rest = rest >> 32; }
    if (T::width > 16 && (rest >> 16) != 0) { n = n + 16; rest = rest >> 16; }
    if (T::width > 8 && (rest >> 8) != 0) { n = n + 8; rest = rest >> 8; }
    if (T::width > 4 && (rest >> 4) != 0) { n = n + 4; rest = rest >> 4; }
    if (T::width > 2 && (rest >> 2) != 0) { n = n + 2; rest = rest >> 2; }
    if (T::width > 1 && (rest >> 1) != 0) { n = n + 1; rest = rest >> 1; }
    return n + (rest != 0 ? 1 : 0);
}

// v / 2^s rounded half to even (HalfUp false) or half up (HalfUp true: floor(v / 2^s + 1/2)), for 0 <= s <= 63, of
// a value of T::width bits: floor(v / 2^s), the bits shifted out against one half. A shift beyond the width gives
// the rounding of a value below one half (0), or of one half at most for the shift equal to it.
template <bool HalfUp, typename T, typename Shift>
inline T round_shift_bits(T v, Shift s) {
    constexpr int kWidth = T::width;
    typedef UInt<kWidth + 1> Part;  // the bits shifted out, one half
    if (s <= 0) return v;
    if (s > kWidth) return T(0);
    const T quotient = s == kWidth ? T(v < 0 ? -1 : 0) : T(v >> s);
    const Part mask = (Part(1) << s) - 1;
    const Part remainder = v & mask;
    const Part half = Part(1) << (s - 1);
    const bool up = HalfUp ? remainder >= half : remainder > half || (remainder == half && (quotient & 1) != 0);
    return up ? T(quotient + 1) : quotient;
}
}  // namespace detail

// numerics.requantize (bit-exact emulation of ORT's y = sat(rne(f32(f32(acc) * M)) + zp)
// for Conv / Gemm / MatMul; also GlobalAveragePool = numerics.gap_requant, see top).
//   (mantissa, exponent) = numerics.float32_parts(M): mantissa in [0, 2^24), exponent in [-149, 104]; acc an int32
//   accumulator (what the processes pass); qmin <= qmax. Widths: ming::widths::requant_exact.
namespace widths {
struct requant_exact {
    static constexpr long long kMagnitudeMax = 1LL << 31;  // |acc|
    static constexpr long long kMantissaMax = (1LL << 24) - 1;
    static constexpr long long kRoundedMax = 1LL << 24;  // a value rounded to 24 significant bits, as an integer
    static constexpr long long kProductMax = kRoundedMax * kMantissaMax;
    static constexpr long long kExponentMin = -149, kExponentMax = 104;
    static constexpr long long kDropMax = 24;  // bit_length(product) - 24
    static constexpr long long kTotalMin = kExponentMin, kTotalMax = 8 + kDropMax + kExponentMax;  // e_tot
    static constexpr long long kLevelMax = 1LL << 40;  // |y| before the zero point: a left shift by 16 at most
    static constexpr long long kSumMax = kLevelMax + (1LL << 31);  // and the int32 zero point
    typedef uint_for<kMagnitudeMax> Magnitude;
    typedef uint_for<kMantissaMax> Mantissa;
    typedef uint_for<kRoundedMax> Rounded;
    typedef uint_for<kProductMax> Product;
    typedef int_for<kExponentMin, kExponentMax> Exponent;
    typedef uint_for<kDropMax> Drop;
    typedef int_for<kTotalMin, kTotalMax> Total;
    typedef uint_for<kLevelMax> Level;
    typedef int_for<-kSumMax, kSumMax> Sum;
    static constexpr int MAGNITUDE_BITS = Magnitude::width;
    static constexpr int MANTISSA_BITS = Mantissa::width;
    static constexpr int ROUNDED_BITS = Rounded::width;
    static constexpr int PRODUCT_BITS = Product::width;
    static constexpr int EXPONENT_BITS = Exponent::width;
    static constexpr int DROP_BITS = Drop::width;
    static constexpr int TOTAL_BITS = Total::width;
    static constexpr int LEVEL_BITS = Level::width;
    static constexpr int SUM_BITS = Sum::width;
};
}  // namespace widths

// The wide-range form (any qmin/qmax within int32, e.g. uint8 [0, 255] or int32 outputs).
inline int32_t requantize_i32(int32_t acc, widths::requant_exact::Mantissa mantissa,
                              widths::requant_exact::Exponent exponent, int32_t zero_point, int32_t qmin, int32_t qmax,
                              bool half_away = false) {
    typedef widths::requant_exact W;
    // 1. M = mantissa * 2^exponent (numerics.float32_parts, done by the compiler).
    // 2. a = |acc| rounded to 24 significant bits (= float32(acc)): a_m * 2^d1.
    const bool negative = acc < 0;
    const Int<32> value = acc;
    const W::Magnitude a = negative ? W::Magnitude(-value) : W::Magnitude(value);
    const uint_for<32> a_bits = detail::bit_length_bits(a);
    const W::Drop d1 = a_bits > 24 ? W::Drop(a_bits - 24) : W::Drop(0);
    const W::Rounded a_m = detail::round_shift_bits<false>(a, d1);  // <= 2^24
    // 3. exact product (< 2^48), rounded to 24 significant bits (= the float32 product).
    const W::Product p = a_m * mantissa;
    const uint_for<W::Product::width> p_bits = detail::bit_length_bits(p);
    const W::Drop d2 = p_bits > 24 ? W::Drop(p_bits - 24) : W::Drop(0);
    const W::Rounded p_m = detail::round_shift_bits<false>(p, d2);  // <= 2^24
    const W::Total e_tot = d1 + d2 + exponent;  // value = p_m * 2^e_tot
    // 4. |y| = rne(p_m * 2^e_tot); a left shift > 16 saturates to 2^40 (> any |q| + |zp|).
    W::Level level;
    if (e_tot > 16) {
        level = p_m > 0 ? W::Level(W::kLevelMax) : W::Level(0);
    } else if (e_tot >= 0) {
        level = W::Level(p_m) << uint_for<16>(e_tot);
    } else {
        // a shift past the rounded value's width leaves 0 (round_shift_bits): the amount needs 5 bits
        constexpr int kPast = W::Rounded::width + 1;
        const uint_for<kPast> shift = e_tot < -kPast ? kPast : -e_tot;
        level = half_away ? detail::round_shift_bits<true>(p_m, shift) : detail::round_shift_bits<false>(p_m, shift);
    }
    // 5. rne is odd-symmetric: re-apply the sign, add the zero point after rounding.
    const W::Sum y = (negative ? W::Sum(-level) : W::Sum(level)) + zero_point;
    return y < qmin ? qmin : y > qmax ? qmax : static_cast<int32_t>(y);
}

inline int8_t requantize(int32_t acc, widths::requant_exact::Mantissa mantissa, widths::requant_exact::Exponent exponent,
                         int32_t zero_point, int32_t qmin = -128, int32_t qmax = 127) {
    return static_cast<int8_t>(requantize_i32(acc, mantissa, exponent, zero_point, qmin, qmax));
}

// numerics.requantize(..., half_away=True): LiteRT's reference FULLY_CONNECTED for TFLite int8 models,
//   y = sat(round_half_away(f32(f32(acc) * M)) + zp), emulated exactly in integers.
inline int8_t requantize_half_away(int32_t acc, widths::requant_exact::Mantissa mantissa,
                                   widths::requant_exact::Exponent exponent, int32_t zero_point, int32_t qmin,
                                   int32_t qmax) {
    return static_cast<int8_t>(requantize_i32(acc, mantissa, exponent, zero_point, qmin, qmax, true));
}

// numerics.requantize_lean: the requantization datapath of the emitted kernels, equal to requantize
// wherever numerics.lean_channels gave (mantissa, shift, limit): mantissa < 2^27, limit < 2^24 and
// the product's whole part below 2^11 (tests/test_lean_requant.py proves it over every accumulator
// value). Per lane: |acc| clamped to 24 bits, one 24 x 27-bit product (two DSP48E2), the fraction's
// distance from one half against a band placed by an 11-bit priority encoder, sign, zero point and
// saturation; the masks give the synthesized operators their widths, and a shift that is a constant
// of the process makes the shifts and masks wiring.
//
// The template argument says where the 24 x 27-bit product is built: two DSP48E2 (Multiplier::dsp) or
// LUT fabric (Multiplier::fabric), by a BIND_OP pragma that only synthesis sees (simulations ignore it).
enum class Multiplier { dsp, fabric };

#ifdef __SYNTHESIS__
#define MING_BIND_MUL_TEXT(x) #x
#define MING_BIND_MUL(var, kind) _Pragma(MING_BIND_MUL_TEXT(HLS BIND_OP variable=var op=mul impl=kind))
#else
#define MING_BIND_MUL(var, kind)
#endif

namespace widths {
struct requant_lean {
    static constexpr long long kMagnitudeMax = 1LL << 31;  // |acc|
    static constexpr long long kClampedMax = (1LL << 24) - 1;  // min(|acc|, limit), 24 bits
    static constexpr long long kMantissaMax = (1LL << 27) - 1;
    static constexpr long long kProductMax = kClampedMax * kMantissaMax;
    static constexpr long long kShiftMin = 1, kShiftMax = 51;
    static constexpr long long kWholeMax = 0x7FF;  // the product's whole part: 11 bits
    static constexpr long long kPositionMin = kShiftMin - 24, kPositionMax = kShiftMax + 11 - 24;
    static constexpr long long kFractionMax = (1LL << kShiftMax) - 1;
    static constexpr long long kBandMax = 1LL << (kPositionMax - 1);
    static constexpr long long kZeroPointMin = -256, kZeroPointMax = 255;  // int8 and uint8 outputs: 9 bits
    static constexpr long long kLevelMax = kWholeMax + 1 + kZeroPointMax;
    typedef uint_for<kMagnitudeMax> Magnitude;
    typedef uint_for<kClampedMax> Clamped;
    typedef uint_for<kMantissaMax> Mantissa;
    typedef uint_for<kProductMax> Product;
    typedef uint_for<kShiftMax> Shift;
    typedef uint_for<kWholeMax> Whole;
    typedef uint_for<kWholeMax + 1> Rounded;
    typedef int_for<kPositionMin, kPositionMax> Position;
    typedef uint_for<kFractionMax> Fraction;
    typedef uint_for<kBandMax> Band;
    typedef int_for<kZeroPointMin, kZeroPointMax> ZeroPoint;
    typedef int_for<-kLevelMax, kLevelMax> Level;
    static constexpr int MAGNITUDE_BITS = Magnitude::width;
    static constexpr int CLAMPED_BITS = Clamped::width;
    static constexpr int MANTISSA_BITS = Mantissa::width;
    static constexpr int PRODUCT_BITS = Product::width;
    static constexpr int SHIFT_BITS = Shift::width;
    static constexpr int WHOLE_BITS = Whole::width;
    static constexpr int ROUNDED_BITS = Rounded::width;
    static constexpr int POSITION_BITS = Position::width;
    static constexpr int FRACTION_BITS = Fraction::width;
    static constexpr int BAND_BITS = Band::width;
    static constexpr int ZERO_POINT_BITS = ZeroPoint::width;
    static constexpr int LEVEL_BITS = Level::width;
};
}  // namespace widths

template <Multiplier M>
inline widths::requant_lean::Product lean_product(widths::requant_lean::Clamped a, widths::requant_lean::Mantissa m);

template <>
inline widths::requant_lean::Product lean_product<Multiplier::dsp>(widths::requant_lean::Clamped a,
                                                                   widths::requant_lean::Mantissa m) {
    const widths::requant_lean::Product product = a * m;
    MING_BIND_MUL(product, dsp)
    return product;
}

template <>
inline widths::requant_lean::Product lean_product<Multiplier::fabric>(widths::requant_lean::Clamped a,
                                                                      widths::requant_lean::Mantissa m) {
    const widths::requant_lean::Product product = a * m;
    MING_BIND_MUL(product, fabric)
    return product;
}

template <Multiplier M = Multiplier::dsp>
inline int32_t requantize_lean_i32(int32_t acc, uint32_t mantissa, uint32_t shift, uint32_t limit,
                                   int32_t zero_point, int32_t qmin, int32_t qmax) {
    typedef widths::requant_lean W;
    const bool negative = acc < 0;
    const Int<32> value = acc;
    const W::Magnitude magnitude = negative ? W::Magnitude(-value) : W::Magnitude(value);
    const W::Magnitude bound = limit;
    const W::Clamped a = (magnitude < bound ? magnitude : bound) & 0xFFFFFF;
    const W::Product product = lean_product<M>(a, W::Mantissa(mantissa & 0x7FFFFFFu));
    const W::Shift s = shift < 1 ? 1u : (shift > 51 ? 51u : shift);
    const W::Whole whole = (product >> s) & 0x7FF;
    const W::Fraction half = W::Fraction(1) << W::Shift(s - 1);
    const W::Fraction fraction = product & ((W::Product(1) << s) - 1);
    // float32 rounds the product at this bit first: a fraction within the band becomes exactly one half
    // (with a scaled mantissa, s - 24 still counts from the float32 product's least significant bit)
    const W::Position position = s + detail::bit_length_bits(whole) - 24;
    typedef uint_for<W::kPositionMax - 1> BandShift;
    const W::Band band = position >= 1 ? W::Band(W::Band(1) << BandShift(position - 1)) : W::Band(0);
    const W::Fraction distance = fraction >= half ? W::Fraction(fraction - half) : W::Fraction(half - fraction);
    const bool up = (fraction > half && distance > band) || (distance <= band && (whole & 1) != 0);
    const W::Rounded rounded = whole + (up ? 1 : 0);
    const W::Level level = (negative ? W::Level(-rounded) : W::Level(rounded)) + W::ZeroPoint(zero_point);
    return level < qmin ? qmin : level > qmax ? qmax : static_cast<int32_t>(level);
}

template <Multiplier M = Multiplier::dsp>
inline int8_t requantize_lean(int32_t acc, uint32_t mantissa, uint32_t shift, uint32_t limit, int32_t zero_point,
                              int32_t qmin = -128, int32_t qmax = 127) {
    return static_cast<int8_t>(requantize_lean_i32<M>(acc, mantissa, shift, limit, zero_point, qmin, qmax));
}

// Two int8 products that share their input in one DSP48E2 multiply (AMD WP486): the 27-bit port
// carries w_high * 2^18 + w_low, the 18-bit port x; |x * w| <= 2^14, so the low product is the
// sign-extended low 18 bits of the result and the high one what remains, shifted down. The operands
// and the product have their exact widths (27 x 8 bits, a 34-bit product: one DSP48E2, bound by BIND_OP).
namespace widths {
struct mac_pair {
    static constexpr long long kWeightsMin = -128 * 262144 - 128, kWeightsMax = 127 * 262144 + 127;
    static constexpr long long kProductMax = 128 * -kWeightsMin;  // |x| <= 128
    static constexpr long long kHighMax = 128 * 128;  // |x * w_high| <= 2^14
    typedef int_for<kWeightsMin, kWeightsMax> Weights;
    typedef int_for<-kProductMax, kProductMax> Product;
    typedef int_for<-131072, 131071> Low;  // the low product's 18 bits, signed
    typedef int_for<-kHighMax, kHighMax> High;
    static constexpr int WEIGHTS_BITS = Weights::width;
    static constexpr int PRODUCT_BITS = Product::width;
    static constexpr int LOW_BITS = Low::width;
    static constexpr int HIGH_BITS = High::width;
};
}  // namespace widths

typedef widths::mac_pair::Weights PairWeights;
typedef widths::mac_pair::Product PairProduct;

inline void multiply_pair(int8_t x, int8_t w_low, int8_t w_high, int32_t& low, int32_t& high) {
    typedef widths::mac_pair W;
    const PairWeights packed = w_high * 262144 + w_low;
    const PairProduct product = packed * x;
    MING_BIND_MUL(product, dsp)
    const uint_for<0x3FFFF> bits = product & 0x3FFFF;
    const W::Low low_product = bits >= 0x20000 ? W::Low(bits - 0x40000) : W::Low(bits);
    const W::High high_product = (product - low_product) >> 18;  // exact
    low = static_cast<int32_t>(low_product);
    high = static_cast<int32_t>(high_product);
}

// numerics.requantize_shift: requantization by the multiplier 2^-shift, y = sat(rne(acc / 2^shift) + zp):
//   a rounding shift and no product (numerics.average_shift gives the shift of an average whose
//   multiplier is a power of two). Contract: acc an int32 accumulator (what the processes pass: the int32 sum of
//   the accumulator and the constant offset), 0 <= shift <= 62.
namespace widths {
struct requant_shift {
    static constexpr long long kAccMin = -(1LL << 31), kAccMax = (1LL << 31) - 1;  // int32
    static constexpr long long kZeroPointMin = -(1LL << 31), kZeroPointMax = (1LL << 31) - 1;
    typedef int_for<kAccMin, kAccMax> Acc;
    typedef int_for<kAccMin + kZeroPointMin, kAccMax + kZeroPointMax> Level;
    static constexpr int ACC_BITS = Acc::width;
    static constexpr int LEVEL_BITS = Level::width;
};
}  // namespace widths

inline int8_t requantize_shift(int32_t acc, int shift, int32_t zero_point, int32_t qmin = -128,
                               int32_t qmax = 127) {
    typedef widths::requant_shift W;
    const W::Acc rounded = detail::round_shift_bits<false>(W::Acc(acc), shift < 0 ? 0 : shift);
    const W::Level level = rounded + zero_point;
    return static_cast<int8_t>(level < qmin ? qmin : level > qmax ? qmax : static_cast<int32_t>(level));
}

// numerics.fixed_point_rescale(x, FixedPoint(multiplier, shift), "half_even", pre_round_offset)
//   = rne((x * multiplier + (pre_round_offset << shift)) / 2^shift).
//   Contract: |x| < 2^31, 0 <= multiplier < 2^31, 1 <= shift <= 62 (to_fixed_point's range),
//   no int64 overflow of the sum; otherwise numpy's wrapping int64 result is reproduced
//   (shift is clamped to [0, 63] first).
inline int64_t fixed_point_rescale(int64_t x, int64_t multiplier, int shift,
                                   int64_t pre_round_offset = 0) {
    const int s = shift < 0 ? 0 : (shift > 63 ? 63 : shift);
    const int64_t v = detail::wrap_add(detail::wrap_mul(x, multiplier),
                                       detail::wrap_shl(pre_round_offset, s));
    return round_shift_half_even(v, s);
}

namespace detail {
// The greatest value round_to_float32 gives for magnitudes up to max: max rounded up at its 24th significant bit.
constexpr long long float32_ceiling(long long max) {
    return magnitude_bits(max) <= 24
               ? max
               : ((max + (1LL << (magnitude_bits(max) - 24)) - 1) >> (magnitude_bits(max) - 24))
                     << (magnitude_bits(max) - 24);
}

// round_to_float32 of a magnitude m <= MAX, at the widths of its range: the mask of the bits below the 24th
// (the smear of m >> 24, as many steps as its width needs), one compare and one add.
template <long long MAX>
inline uint_for<float32_ceiling(MAX)> round_to_float32(uint_for<MAX> m) {
    typedef uint_for<MAX> Magnitude;
    typedef uint_for<float32_ceiling(MAX)> Rounded;
    constexpr int kBelowBits = Magnitude::width > 24 ? Magnitude::width - 24 : 1;
    typedef UInt<kBelowBits> Below;
    Below below = Below(m >> 24);
    if (kBelowBits > 1) below = Below(below | (below >> 1));
    if (kBelowBits > 2) below = Below(below | (below >> 2));
    if (kBelowBits > 4) below = Below(below | (below >> 4));
    if (kBelowBits > 8) below = Below(below | (below >> 8));
    if (kBelowBits > 16) below = Below(below | (below >> 16));
    if (kBelowBits > 32) below = Below(below | (below >> 32));
    const Rounded unit = Rounded(below) + 1;  // weight of the least significant bit kept
    const Magnitude rest = Magnitude(m & below), kept = Magnitude(m & ~Magnitude(below));
    const Below half = Below(unit >> 1);
    const bool up = rest != 0 && (rest > half || (rest == half && (kept & unit) != 0));
    return up ? Rounded(kept + unit) : Rounded(kept);
}

// round_to_float32 of a signed value |v| <= MAX (odd-symmetric): the magnitude's mask-and-add rounding, the sign
// back.
template <long long MAX>
inline int_for<-float32_ceiling(MAX), float32_ceiling(MAX)> round_to_float32_signed(int_for<-MAX, MAX> v) {
    typedef uint_for<MAX> Magnitude;
    typedef int_for<-float32_ceiling(MAX), float32_ceiling(MAX)> Signed;
    const bool negative = v < 0;
    const Magnitude magnitude = negative ? Magnitude(-v) : Magnitude(v);
    const uint_for<float32_ceiling(MAX)> rounded = round_to_float32<MAX>(magnitude);
    return negative ? Signed(-rounded) : Signed(rounded);
}

}  // namespace detail

// numerics.mul_requant (QLinearMul, bit-exact with onnxruntime's MlasQLinearMulKernel):
//   P = (a - a_zp) * (b - b_zp);  y = sat(rne(f32(f32(f32(P) * R) + (y_zp + offset))) - offset)
//   with R = mantissa * 2^-shift = float32(float32(sa * sb) / sy) (numerics.mul_parts), offset the domain
//   onnxruntime runs the kernel in (128: uint8 on x86). In units of 2^-shift: the float32 product
//   V = rn24(|P| * mantissa), the float32 sum W = rn24(V + (y_zp + offset) << shift), both sums exact.
//   Per lane: an 8 x 8-bit product, one 17 x 24-bit product (one DSP48E2), two 56-bit mask-and-add
//   roundings, one rounding at the fixed binary point `shift` (wiring), the offset and the saturation.
//   Contract: int8 a, b, a_zp, b_zp, y_zp; 0 <= offset <= 128; mantissa < 2^24; 9 <= shift <= 47
//   (MUL_MULTIPLIER_RANGE); -128 <= qmin <= qmax <= 127.
namespace widths {
struct requant_mul {
    static constexpr long long kCenteredMax = 255;  // |a - a_zp|: int8 values and zero points
    static constexpr long long kProductMax = kCenteredMax * kCenteredMax;
    static constexpr long long kMantissaMax = (1LL << 24) - 1;
    static constexpr long long kScaledMax = kProductMax * kMantissaMax;  // |P| * mantissa
    static constexpr long long kValueMax = detail::float32_ceiling(kScaledMax);  // V
    static constexpr long long kZeroMin = -128, kZeroMax = 255;  // y_zp + offset
    static constexpr long long kShiftMax = 47;  // numerics.MUL_MULTIPLIER_RANGE
    static constexpr long long kZeroShiftedMin = kZeroMin * (1LL << kShiftMax), kZeroShiftedMax = kZeroMax << kShiftMax;
    static constexpr long long kSumMax = kValueMax + kZeroShiftedMax;
    static constexpr long long kRoundedMax = detail::float32_ceiling(kSumMax);  // W
    static constexpr long long kLevelMin = -128, kLevelMax = 127 + 128;  // y within [qmin + offset, qmax + offset]
    typedef int_for<-kCenteredMax, kCenteredMax> Centered;
    typedef int_for<-kProductMax, kProductMax> Product;
    typedef uint_for<kProductMax> Magnitude;
    typedef uint_for<kMantissaMax> Mantissa;
    typedef uint_for<kScaledMax> Scaled;
    typedef int_for<-kValueMax, kValueMax> Value;
    typedef int_for<kZeroMin, kZeroMax> Zero;
    typedef int_for<kZeroShiftedMin, kZeroShiftedMax> ZeroShifted;
    typedef int_for<-kSumMax, kSumMax> Sum;
    typedef uint_for<kSumMax> SumMagnitude;
    typedef int_for<-kRoundedMax, kRoundedMax> Rounded;
    typedef int_for<kLevelMin, kLevelMax> Level;
    typedef uint_for<(1LL << kShiftMax)> Power;
    static constexpr int CENTERED_BITS = Centered::width;
    static constexpr int PRODUCT_BITS = Product::width;
    static constexpr int MAGNITUDE_BITS = Magnitude::width;
    static constexpr int MANTISSA_BITS = Mantissa::width;
    static constexpr int SCALED_BITS = Scaled::width;
    static constexpr int VALUE_BITS = Value::width;
    static constexpr int ZERO_BITS = Zero::width;
    static constexpr int ZERO_SHIFTED_BITS = ZeroShifted::width;
    static constexpr int SUM_BITS = Sum::width;
    static constexpr int SUM_MAGNITUDE_BITS = SumMagnitude::width;
    static constexpr int ROUNDED_BITS = Rounded::width;
    static constexpr int LEVEL_BITS = Level::width;
};
}  // namespace widths

inline int32_t mul_requant_i32(int32_t a, int32_t a_zp, int32_t b, int32_t b_zp, uint32_t mantissa, int shift,
                               int32_t y_zp, int32_t offset, int32_t qmin, int32_t qmax) {
    typedef widths::requant_mul W;
    typedef int_for<-128, 127> Value8;
    const int s = shift < 0 ? 0 : (shift > 47 ? 47 : shift);
    const W::Centered da = Value8(a) - Value8(a_zp), db = Value8(b) - Value8(b_zp);
    const W::Product product = da * db;
    const W::Magnitude magnitude = product < 0 ? W::Magnitude(-product) : W::Magnitude(product);
    const W::Scaled scaled = magnitude * W::Mantissa(mantissa & 0xFFFFFFu);
    const uint_for<W::kValueMax> v = detail::round_to_float32<W::kScaledMax>(scaled);
    const W::Zero zero = Value8(y_zp) + uint_for<128>(offset);
    const W::ZeroShifted zero_shifted = zero * (W::Power(1) << s);  // a shift by a constant of the process
    const W::Sum sum = (product < 0 ? W::Value(-v) : W::Value(v)) + zero_shifted;
    const W::Rounded w = detail::round_to_float32_signed<W::kSumMax>(sum);
    const W::Rounded y = detail::round_shift_bits<false>(w, s);
    const W::Level low = Value8(qmin) + uint_for<128>(offset), high = Value8(qmax) + uint_for<128>(offset);
    const W::Level level = y < low ? low : y > high ? high : W::Level(y);
    return static_cast<int32_t>(level - uint_for<128>(offset));
}

inline int8_t mul_requant(int32_t a, int32_t a_zp, int32_t b, int32_t b_zp, uint32_t mantissa, int shift,
                          int32_t y_zp, int32_t offset, int32_t qmin = -128, int32_t qmax = 127) {
    return static_cast<int8_t>(mul_requant_i32(a, a_zp, b, b_zp, mantissa, shift, y_zp, offset, qmin, qmax));
}


// numerics.add_fused_requant (QLinearAdd, bit-exact with onnxruntime's MlasQLinearAddKernelAvx2Helper):
//   a' = a + offset, b' = b + offset (offset: the domain the kernel runs in, 128 = uint8 on x86);
//   inner = rn24(b' * mb + fixed), outer = rn24(a' * ma + inner) (the two float32 fmas, each an exact
//   integer sum and one rounding, in units of 2^-shift), y' = sat(rne(outer / 2^shift)) to
//   [qmin + offset, qmax + offset], y = y' - offset.  (ma, mb, fixed, shift) = numerics.add_constants(sa, za,
//   sb, zb, sy, zy, offset): the ratios f32(sa/sy), f32(sb/sy) and onnxruntime's float32 constant
//   F = f32(zy' - fma(ra, za', f32(rb * zb'))) at the binary point 2^-shift; the zero points are in `fixed`.
//   Per lane: two 9 x 24-bit products (the multipliers' trailing zeros are wiring), two mask-and-add
//   roundings, a rounding at the constant `shift`, the offset and the saturation.
//   Contract: int8 a, b; 0 < ma < 2^MaBits, 0 < mb < 2^MbBits, |fixed| < 2^FixedBits (the template arguments:
//   the process's constants' bit lengths; numerics.add_constants keeps 256 * ma, 256 * mb and |fixed| below 2^59,
//   so MaBits, MbBits <= 51 and FixedBits <= 59); 0 <= shift <= 62; 0 <= offset <= 128;
//   -128 <= qmin <= qmax <= 127. Every intermediate has the width of its range at these bounds
//   (ming::widths::requant_add, which benchmarks/calibration/requant_add.v takes).
namespace widths {
template <int MaBits, int MbBits, int FixedBits>
struct requant_add {
    static constexpr long long kShiftedMin = -128, kShiftedMax = 255;  // a + offset: int8, offset 0 .. 128
    static constexpr long long kMaMax = (1LL << MaBits) - 1, kMbMax = (1LL << MbBits) - 1;
    static constexpr long long kFixedMax = (1LL << FixedBits) - 1;
    static constexpr long long kAProductMax = kShiftedMax * kMaMax, kBProductMax = kShiftedMax * kMbMax;
    static constexpr long long kInnerSumMax = kBProductMax + kFixedMax;
    static constexpr long long kInnerMax = detail::float32_ceiling(kInnerSumMax);
    static constexpr long long kOuterSumMax = kAProductMax + kInnerMax;
    static constexpr long long kOuterMax = detail::float32_ceiling(kOuterSumMax);
    typedef int_for<-128, 127> Value;
    typedef uint_for<128> Offset;
    typedef int_for<kShiftedMin, kShiftedMax> Shifted;
    typedef uint_for<kMaMax> Ma;
    typedef uint_for<kMbMax> Mb;
    typedef int_for<-kFixedMax, kFixedMax> Fixed;
    typedef int_for<kShiftedMin * kMaMax, kAProductMax> AProduct;
    typedef int_for<kShiftedMin * kMbMax, kBProductMax> BProduct;
    typedef int_for<-kInnerSumMax, kInnerSumMax> InnerSum;
    typedef int_for<-kInnerMax, kInnerMax> Inner;
    typedef int_for<-kOuterSumMax, kOuterSumMax> OuterSum;
    typedef int_for<-kOuterMax, kOuterMax> Outer;
    typedef int_for<kShiftedMin, kShiftedMax> Level;  // y' in [qmin + offset, qmax + offset]
    static constexpr int SHIFTED_BITS = Shifted::width;
    static constexpr int MA_BITS = Ma::width;
    static constexpr int MB_BITS = Mb::width;
    static constexpr int FIXED_BITS = Fixed::width;
    static constexpr int A_PRODUCT_BITS = AProduct::width;
    static constexpr int B_PRODUCT_BITS = BProduct::width;
    static constexpr int INNER_SUM_BITS = InnerSum::width;
    static constexpr int INNER_MAGNITUDE_BITS = uint_for<kInnerSumMax>::width;
    static constexpr int INNER_BITS = Inner::width;
    static constexpr int OUTER_SUM_BITS = OuterSum::width;
    static constexpr int OUTER_MAGNITUDE_BITS = uint_for<kOuterSumMax>::width;
    static constexpr int OUTER_BITS = Outer::width;
    static constexpr int LEVEL_BITS = Level::width;
};
}  // namespace widths

template <int MaBits, int MbBits, int FixedBits>
inline int32_t add_requant_i32(int32_t a, int32_t b, typename widths::requant_add<MaBits, MbBits, FixedBits>::Ma ma,
                               typename widths::requant_add<MaBits, MbBits, FixedBits>::Mb mb,
                               typename widths::requant_add<MaBits, MbBits, FixedBits>::Fixed fixed, int shift,
                               typename widths::requant_add<MaBits, MbBits, FixedBits>::Offset offset, int32_t qmin,
                               int32_t qmax) {
    typedef widths::requant_add<MaBits, MbBits, FixedBits> W;
    const typename W::Shifted a_shifted = typename W::Value(a) + offset;
    const typename W::Shifted b_shifted = typename W::Value(b) + offset;
    const typename W::BProduct b_product = b_shifted * mb;
    const typename W::InnerSum inner_sum = b_product + fixed;
    const typename W::Inner inner = detail::round_to_float32_signed<W::kInnerSumMax>(inner_sum);
    const typename W::AProduct a_product = a_shifted * ma;
    const typename W::OuterSum outer_sum = a_product + inner;
    const typename W::Outer outer = detail::round_to_float32_signed<W::kOuterSumMax>(outer_sum);
    const typename W::Outer rounded = detail::round_shift_bits<false>(outer, shift);
    const typename W::Level low = typename W::Value(qmin) + offset, high = typename W::Value(qmax) + offset;
    const typename W::Level level = rounded < low ? low : rounded > high ? high : typename W::Level(rounded);
    return static_cast<int32_t>(level - offset);
}

template <int MaBits, int MbBits, int FixedBits>
inline int8_t add_requant(int32_t a, int32_t b, typename widths::requant_add<MaBits, MbBits, FixedBits>::Ma ma,
                          typename widths::requant_add<MaBits, MbBits, FixedBits>::Mb mb,
                          typename widths::requant_add<MaBits, MbBits, FixedBits>::Fixed fixed, int shift,
                          typename widths::requant_add<MaBits, MbBits, FixedBits>::Offset offset, int32_t qmin = -128,
                          int32_t qmax = 127) {
    return static_cast<int8_t>(add_requant_i32<MaBits, MbBits, FixedBits>(a, b, ma, mb, fixed, shift, offset, qmin,
                                                                         qmax));
}

// numerics.add_float_requant (onnxruntime's unfused DQ -> Add/Sub -> Q, bit-exact):
//   y = sat(rne(f32(f32(DQ(a) +/- DQ(b)) / sy)) + y_zp), DQ(v) = f32(s * (v - zp)).
//   (a_mantissa, a_align, b_mantissa, b_align, x_shift, x_limit, divisor) = numerics.float_add_constants
//   (b_mantissa negative for Sub).  DA = rn24((a - a_zp) * a_mantissa) << a_align and DB likewise (the two
//   float32 products), X = rn24(DA + DB) (the float32 sum); N = min(|X|, x_limit) << x_shift; the 10-bit
//   quotient y0 = floor(N / (divisor << 25)) by restoring division (10 compare-subtracts) and its remainder r;
//   f32(q) is exactly y0 + 1/2 when r is within divisor << bitlen(y0) of divisor << 24, so
//   k = y0 + (r > half + band) for even y0, y0 + (r >= half - band) for odd y0; sign, zero point, saturation.
//   Contract: int8 a, b, zero points; |a_mantissa|, |b_mantissa| < 2^24; a_align, b_align <= 28;
//   x_limit << x_shift and divisor << 35 below 2^61 (numerics.float_add_constants checks it); the template
//   arguments bound the constants (below).
// The widths depend on the constants of the process: AAlignMax, BAlignMax, XShiftMax bound a_align, b_align and
// x_shift, DivisorBits the divisor's bit length (the compiler writes the values themselves; numerics.
// float_add_constants' domain is <28, 28, 58, 26>). The dividend min(|X|, x_limit) << x_shift is at most
// (divisor << 35) + 2^x_shift, as x_limit = ((divisor << 35) >> x_shift) + 1.
namespace widths {
template <int AAlignMax, int BAlignMax, int XShiftMax, int DivisorBits>
struct requant_add_float {
    static constexpr long long kCenteredMax = 255;  // |a - a_zp|: int8 values and zero points
    static constexpr long long kMantissaMax = (1LL << 24) - 1;  // |a_mantissa|, |b_mantissa| (negative for Sub)
    static constexpr long long kProductMax = kCenteredMax * kMantissaMax;
    static constexpr long long kTermMax = detail::float32_ceiling(kProductMax);  // a float32 product
    static constexpr long long kAAlignedMax = kTermMax << AAlignMax, kBAlignedMax = kTermMax << BAlignMax;
    static constexpr long long kSumMax = kAAlignedMax + kBAlignedMax;
    static constexpr long long kXMax = detail::float32_ceiling(kSumMax);  // X
    static constexpr long long kDivisorMax = (1LL << DivisorBits) - 1;
    static constexpr long long kTopMax = kDivisorMax << 35;  // quotients from 1024 on saturate
    static constexpr long long kLimitMax = kTopMax + 1;
    static constexpr long long kRestMax = kTopMax + (1LL << XShiftMax);
    static constexpr long long kUnitMax = kDivisorMax << 25;
    static constexpr long long kQuotientMax = 1024;  // FLOAT_ADD_QUOTIENT_BITS
    static constexpr long long kBandMax = kDivisorMax << 11;  // d << bit_length(y0)
    static constexpr long long kHalfMax = kDivisorMax << 24;
    static constexpr long long kLevelMax = kQuotientMax + 1 + 128;  // |k| and an int8 zero point
    typedef int_for<-kCenteredMax, kCenteredMax> Centered;
    typedef int_for<-kMantissaMax, kMantissaMax> Mantissa;
    typedef int_for<-kProductMax, kProductMax> Product;
    typedef int_for<-kTermMax, kTermMax> Term;
    typedef uint_for<AAlignMax> AAlign;
    typedef uint_for<BAlignMax> BAlign;
    typedef uint_for<(1LL << AAlignMax)> APower;
    typedef uint_for<(1LL << BAlignMax)> BPower;
    typedef int_for<-kAAlignedMax, kAAlignedMax> AAligned;
    typedef int_for<-kBAlignedMax, kBAlignedMax> BAligned;
    typedef int_for<-kSumMax, kSumMax> Sum;
    typedef int_for<-kXMax, kXMax> X;
    typedef uint_for<kXMax> Magnitude;
    typedef uint_for<XShiftMax> Shift;
    typedef uint_for<kLimitMax> Limit;
    typedef uint_for<kRestMax> Rest;
    typedef uint_for<kDivisorMax> Divisor;
    typedef uint_for<kUnitMax> Unit;
    typedef uint_for<kQuotientMax> Quotient;
    typedef uint_for<kBandMax> Band;
    typedef uint_for<kHalfMax + kBandMax> Threshold;
    typedef int_for<-kLevelMax, kLevelMax> Level;
    static constexpr int CENTERED_BITS = Centered::width;
    static constexpr int MANTISSA_BITS = Mantissa::width;
    static constexpr int PRODUCT_BITS = Product::width;
    static constexpr int TERM_BITS = Term::width;
    static constexpr int A_ALIGNED_BITS = AAligned::width;
    static constexpr int B_ALIGNED_BITS = BAligned::width;
    static constexpr int SUM_BITS = Sum::width;
    static constexpr int X_BITS = X::width;
    static constexpr int MAGNITUDE_BITS = Magnitude::width;
    static constexpr int LIMIT_BITS = Limit::width;
    static constexpr int REST_BITS = Rest::width;
    static constexpr int DIVISOR_BITS = Divisor::width;
    static constexpr int UNIT_BITS = Unit::width;
    static constexpr int QUOTIENT_BITS = Quotient::width;
    static constexpr int BAND_BITS = Band::width;
    static constexpr int THRESHOLD_BITS = Threshold::width;
    static constexpr int LEVEL_BITS = Level::width;
};
}  // namespace widths

namespace detail {
// One step of a restoring division: the quotient bit `bit` of rest / unit.
template <typename Rest, typename Quotient, typename Unit>
inline void division_step(Rest& rest, Quotient& quotient, Unit unit, int bit) {
    const Rest part = Rest(unit) << bit;
    if (rest >= part) {
        rest = rest - part;
        quotient = quotient | (Quotient(1) << bit);
    }
}

// DA or DB: the float32 product (v - zp) * mantissa, aligned by a shift (a constant of the process).
template <typename W, typename Aligned, typename Power, typename Align>
inline Aligned float_add_term(int32_t v, int32_t zp, typename W::Mantissa m, Align align) {
    typedef int_for<-128, 127> Value8;
    const typename W::Product product = typename W::Centered(Value8(v) - Value8(zp)) * m;
    const typename W::Term term = round_to_float32_signed<W::kProductMax>(product);
    return Aligned(term) * (Power(1) << align);
}
}  // namespace detail

template <int AAlignMax, int BAlignMax, int XShiftMax, int DivisorBits>
inline int32_t add_float_requant_i32(
    int32_t a, int32_t a_zp, int32_t b, int32_t b_zp,
    typename widths::requant_add_float<AAlignMax, BAlignMax, XShiftMax, DivisorBits>::Mantissa a_mantissa, int a_align,
    typename widths::requant_add_float<AAlignMax, BAlignMax, XShiftMax, DivisorBits>::Mantissa b_mantissa, int b_align,
    int x_shift, typename widths::requant_add_float<AAlignMax, BAlignMax, XShiftMax, DivisorBits>::Limit x_limit,
    typename widths::requant_add_float<AAlignMax, BAlignMax, XShiftMax, DivisorBits>::Divisor divisor, int32_t y_zp,
    int32_t qmin, int32_t qmax) {
    typedef widths::requant_add_float<AAlignMax, BAlignMax, XShiftMax, DivisorBits> W;
    const typename W::AAlign sa = a_align < 0 ? 0 : (a_align > AAlignMax ? AAlignMax : a_align);
    const typename W::BAlign sb = b_align < 0 ? 0 : (b_align > BAlignMax ? BAlignMax : b_align);
    const typename W::Shift sx = x_shift < 0 ? 0 : (x_shift > XShiftMax ? XShiftMax : x_shift);
    const typename W::AAligned da =
        detail::float_add_term<W, typename W::AAligned, typename W::APower>(a, a_zp, a_mantissa, sa);
    const typename W::BAligned db =
        detail::float_add_term<W, typename W::BAligned, typename W::BPower>(b, b_zp, b_mantissa, sb);
    const typename W::Sum sum = da + db;
    const typename W::X x = detail::round_to_float32_signed<W::kSumMax>(sum);
    const typename W::Magnitude magnitude = x < 0 ? typename W::Magnitude(-x) : typename W::Magnitude(x);
    typename W::Rest rest = typename W::Rest(magnitude < x_limit ? typename W::Limit(magnitude) : x_limit) << sx;
    const typename W::Unit unit = typename W::Unit(divisor) << 25;
    typename W::Quotient y0 = 0;
    const bool saturated = rest >= (typename W::Rest(unit) << 10);
    if (saturated) {
        y0 = 1024;
    } else {
        detail::division_step(rest, y0, unit, 9);
        detail::division_step(rest, y0, unit, 8);
        detail::division_step(rest, y0, unit, 7);
        detail::division_step(rest, y0, unit, 6);
        detail::division_step(rest, y0, unit, 5);
        detail::division_step(rest, y0, unit, 4);
        detail::division_step(rest, y0, unit, 3);
        detail::division_step(rest, y0, unit, 2);
        detail::division_step(rest, y0, unit, 1);
        detail::division_step(rest, y0, unit, 0);
    }
    const typename W::Band band = typename W::Band(divisor) << detail::bit_length_bits(y0);
    const typename W::Threshold half = typename W::Threshold(divisor) << 24;
    const bool up = !saturated && ((y0 & 1) != 0 ? rest >= half - band : rest > half + band);
    const uint_for<W::kQuotientMax + 1> k = y0 + (up ? 1 : 0);
    const typename W::Level level = (x < 0 ? typename W::Level(-k) : typename W::Level(k)) + int_for<-128, 127>(y_zp);
    return level < qmin ? qmin : level > qmax ? qmax : static_cast<int32_t>(level);
}

template <int AAlignMax, int BAlignMax, int XShiftMax, int DivisorBits>
inline int8_t add_float_requant(
    int32_t a, int32_t a_zp, int32_t b, int32_t b_zp,
    typename widths::requant_add_float<AAlignMax, BAlignMax, XShiftMax, DivisorBits>::Mantissa a_mantissa, int a_align,
    typename widths::requant_add_float<AAlignMax, BAlignMax, XShiftMax, DivisorBits>::Mantissa b_mantissa, int b_align,
    int x_shift, typename widths::requant_add_float<AAlignMax, BAlignMax, XShiftMax, DivisorBits>::Limit x_limit,
    typename widths::requant_add_float<AAlignMax, BAlignMax, XShiftMax, DivisorBits>::Divisor divisor, int32_t y_zp,
    int32_t qmin = -128, int32_t qmax = 127) {
    return static_cast<int8_t>(add_float_requant_i32<AAlignMax, BAlignMax, XShiftMax, DivisorBits>(
        a, a_zp, b, b_zp, a_mantissa, a_align, b_mantissa, b_align, x_shift, x_limit, divisor, y_zp, qmin, qmax));
}

// onnxruntime's QLinearAveragePool over windows (numerics.WindowAverageConstants), in units of 2^exponent of
// the input scale sx = mantissa * 2^exponent, where every float32 value of the kernel's sum is an integer.
// The widths of the three functions are those of their values over this domain: int8 x and zero point, the
// float32 input scale's 24-bit mantissa, windows of `Window` elements (a template argument: the process's
// K_H * K_W), every partial sum below numerics.window_average_constants' bound 2 * Window * 2^32 + 1, and that
// function's row constants (low, high in [-bound, bound - 1]; thresholds in [0, 2 * bound]; drop, ratio, offset
// as average_level says). benchmarks/calibration/average_{term,add,level}.v take their *_BITS (convention: see
// tests/test_calibration_widths.py).
namespace widths {
struct average_term {
    static constexpr long long kValueMax = 127, kValueMin = -128;  // x and its zero point: int8
    static constexpr long long kCenteredMax = kValueMax - kValueMin;  // |x - x_zp|
    static constexpr long long kMantissaMax = (1LL << 24) - 1;
    static constexpr long long kProductMax = kCenteredMax * kMantissaMax;
    static constexpr long long kTermMax = detail::float32_ceiling(kProductMax);  // 2^32
    typedef int_for<kValueMin, kValueMax> Value;
    typedef int_for<-kCenteredMax, kCenteredMax> Centered;
    typedef uint_for<kMantissaMax> Mantissa;
    typedef int_for<-kProductMax, kProductMax> Product;
    typedef int_for<-kTermMax, kTermMax> Term;
    static constexpr int CENTERED_BITS = Centered::width;
    static constexpr int MANTISSA_BITS = Mantissa::width;
    static constexpr int PRODUCT_BITS = Product::width;
    static constexpr int MAGNITUDE_BITS = uint_for<kProductMax>::width;
    static constexpr int ROUNDED_BITS = uint_for<kTermMax>::width;
    static constexpr int TERM_BITS = Term::width;
};

template <int Window>
struct average_add {
    static constexpr long long kSumMax = 2LL * Window * average_term::kTermMax;  // a partial sum's magnitude
    static constexpr long long kTotalMax = 2 * kSumMax;  // a partial sum plus a term or a column's partial sum
    typedef int_for<-kSumMax, kSumMax> Sum;
    typedef int_for<-kTotalMax, kTotalMax> Total;
    static constexpr int SUM_BITS = Sum::width;
    static constexpr int TOTAL_BITS = Total::width;
    static constexpr int MAGNITUDE_BITS = uint_for<kTotalMax>::width;
    static constexpr int ROUNDED_BITS = uint_for<detail::float32_ceiling(kTotalMax)>::width;
};

template <int Window>
struct average_level {
    static constexpr long long kBound = average_add<Window>::kSumMax + 1;  // window_average_constants' bound
    static constexpr long long kUMax = 2 * kBound - 1;  // the clamped sum less low: high - low
    static constexpr long long kThresholdMax = 2 * kBound;  // T'
    static constexpr long long kDropMax = magnitude_bits(kUMax) - 16;  // drop = bit_length(high - low) - 16
    static constexpr long long kScaledMax = (1LL << 16) - 1;  // u >> drop (the contract)
    static constexpr long long kRatioMax = (1LL << 26) - 1;  // numerics.AVERAGE_RATIO_LIMIT
    static constexpr long long kOffsetMax = (1LL << 40) - 1;  // numerics.AVERAGE_OFFSET_LIMIT
    static constexpr long long kProductMax = kScaledMax * kRatioMax;
    static constexpr long long kEstimateMin = -kOffsetMax, kEstimateMax = kProductMax + kOffsetMax;
    static constexpr long long kLevelMax = 255;  // a row holds 256 thresholds
    typedef int_for<-kBound, kBound - 1> Limit;
    typedef uint_for<kUMax> U;
    typedef uint_for<kThresholdMax> Threshold;
    typedef uint_for<kDropMax> Drop;
    typedef uint_for<kScaledMax> Scaled;
    typedef uint_for<kRatioMax> Ratio;
    typedef int_for<-kOffsetMax, kOffsetMax> Offset;
    typedef uint_for<kProductMax> Product;
    typedef int_for<kEstimateMin, kEstimateMax> Estimate;
    typedef int_for<(kEstimateMin >> 24), (kEstimateMax >> 24)> Whole;
    typedef uint_for<kLevelMax> Level;
    static constexpr int LIMIT_BITS = Limit::width;
    static constexpr int U_BITS = U::width;
    static constexpr int THRESHOLD_BITS = Threshold::width;
    static constexpr int DROP_BITS = Drop::width;
    static constexpr int SCALED_BITS = Scaled::width;
    static constexpr int RATIO_BITS = Ratio::width;
    static constexpr int OFFSET_BITS = Offset::width;
    static constexpr int PRODUCT_BITS = Product::width;
    static constexpr int ESTIMATE_BITS = Estimate::width;
    static constexpr int WHOLE_BITS = Whole::width;
    static constexpr int LEVEL_BITS = Level::width;
};
}  // namespace widths

// A partial sum of the chain of a window of `Window` elements (the process's registers of the chain).
template <int Window>
using AverageSum = typename widths::average_add<Window>::Sum;

// numerics.window_average_terms: a window element's float32 sx * (x - x_zp), a 9 x 24-bit product rounded to
//   24 significant bits.
inline widths::average_term::Term average_term(int8_t x, int32_t x_zp, uint32_t mantissa) {
    typedef widths::average_term W;
    const W::Centered centered = W::Value(x) - W::Value(x_zp);
    const W::Product product = centered * W::Mantissa(mantissa);
    return detail::round_to_float32_signed<W::kProductMax>(product);
}

// numerics.window_average_sum, one element: the float32 sum + term, or + a column's partial sum (both float32
//   values in these units).
template <int Window>
inline typename widths::average_add<Window>::Sum average_add(typename widths::average_add<Window>::Sum sum,
                                                             typename widths::average_add<Window>::Sum addend) {
    typedef widths::average_add<Window> W;
    const typename W::Total total = sum + addend;
    return typename W::Sum(detail::round_to_float32_signed<W::kTotalMax>(total));
}

// numerics.window_average_level: the output from a window's sum, by the row of its divisor: the sum clamped to
//   [low, high], less low (u); the level estimate k = clamp(((u >> drop) * ratio + offset) >> 24, 0, last), the
//   level or one above it; one less where u is below k's threshold (a read of the row's 256 thresholds).
//   Contract (numerics.window_average_constants proves it): u >> drop < 2^16, 0 < ratio < 2^26, |offset| < 2^40,
//   0 <= last <= 255.
template <int Window, typename Thresholds>
inline int8_t average_level(typename widths::average_add<Window>::Sum sum,
                            typename widths::average_level<Window>::Limit low,
                            typename widths::average_level<Window>::Limit high,
                            typename widths::average_level<Window>::Drop drop,
                            typename widths::average_level<Window>::Ratio ratio,
                            typename widths::average_level<Window>::Offset offset, const Thresholds& thresholds,
                            typename widths::average_level<Window>::Level last, int32_t qmin) {
    typedef widths::average_level<Window> W;
    const typename W::U u = (sum < low ? low : sum > high ? high : typename W::Limit(sum)) - low;
    const typename W::Scaled scaled = u >> drop;
    const typename W::Product product = scaled * ratio;
    const typename W::Estimate estimate = product + offset;
    const typename W::Whole whole = estimate >> 24;
    const typename W::Level k = whole < 0 ? typename W::Level(0) : whole > last ? last : typename W::Level(whole);
    const typename W::Threshold threshold(thresholds[k]);  // a ROM word
    const int_for<-256, 255> level = k - typename W::Level(u < threshold ? 1 : 0);
    return static_cast<int8_t>(level + qmin);
}

// numerics.fixed_point_requantize: the int8 requantization of TFLite models (TOSA RESCALE, scale32),
//   y = sat(int32((acc * multiplier + 2^(shift-1) [+/- 2^30 if DoubleRound and shift > 31]) >> shift) + zp)
//   acc already holds the bias; the 32 x 32-bit product is exact at its 63 bits.
namespace widths {
struct requant_fixed_point {
    static constexpr long long kAccMin = -(1LL << 31), kAccMax = (1LL << 31) - 1;  // int32
    static constexpr long long kMultiplierMax = (1LL << 31) - 1;  // TFLite's QuantizeMultiplier: non-negative
    static constexpr long long kProductMin = kAccMin * kMultiplierMax, kProductMax = kAccMax * kMultiplierMax;
    static constexpr long long kShiftMin = 2, kShiftMax = 62;
    static constexpr long long kRemainderMax = (1LL << kShiftMax) - 1;
    static constexpr long long kThresholdMax = (1LL << (kShiftMax - 1)) + (1LL << 30);  // one half, double rounded
    typedef int_for<kAccMin, kAccMax> Acc;
    typedef uint_for<kMultiplierMax> Multiplier;
    typedef int_for<kProductMin, kProductMax> Product;  // 63 bits
    typedef int_for<(kProductMin >> kShiftMin), (kProductMax >> kShiftMin)> Quotient;
    typedef uint_for<kRemainderMax> Remainder;
    typedef uint_for<kThresholdMax> Threshold;
    static constexpr int ACC_BITS = Acc::width;
    static constexpr int MULTIPLIER_BITS = Multiplier::width;
    static constexpr int PRODUCT_BITS = Product::width;
    static constexpr int QUOTIENT_BITS = Quotient::width;
    static constexpr int REMAINDER_BITS = Remainder::width;
    static constexpr int THRESHOLD_BITS = Threshold::width;
};
}  // namespace widths

// TOSA's sum (acc * multiplier + rounding) >> shift is computed without its 64-bit sum: with the product
// p = q * 2^shift + r, it is q plus one where r reaches 2^shift less the rounding (2^(shift-1), or with
// DoubleRound and shift > 31, 2^(shift-1) + 2^30 for acc >= 0 and 2^(shift-1) - 2^30 below): a compare of the
// bits shifted out. Contract: multiplier >= 0 (TFLite's QuantizeMultiplier), 2 <= shift <= 62; the quotient and
// the zero-point sum wrap to int32 as TOSA's do.
template <bool DoubleRound>
inline int8_t requantize_fixed_point(int32_t acc, int32_t multiplier, int shift, int32_t zero_point,
                                     int32_t qmin, int32_t qmax) {
    typedef widths::requant_fixed_point W;
    const uint_for<W::kShiftMax> s = shift < 2 ? 2 : shift > 62 ? 62 : shift;  // shifters by a 6-bit amount
    const W::Product product = W::Acc(acc) * W::Multiplier(multiplier);
    const W::Quotient quotient = product >> s;
    const W::Remainder remainder = product & ((W::Remainder(1) << s) - 1);
    const W::Threshold half = W::Threshold(1) << uint_for<W::kShiftMax - 1>(s - 1);
    const W::Threshold threshold = !DoubleRound || s <= 31 ? half
                                   : acc >= 0             ? W::Threshold(half - (1 << 30))
                                                          : W::Threshold(half + (1 << 30));
    const Int<32> scaled = wrap_to<32>(quotient + (remainder >= threshold ? 1 : 0));
    const Int<32> shifted = wrap_to<32>(scaled + zero_point);
    return static_cast<int8_t>(shifted < qmin ? qmin : shifted > qmax ? qmax : static_cast<int32_t>(shifted));
}

// numerics.fixed_point_requantize of TFLite's MUL (LiteRT's reference MulElementwise): the int8 values plus
//   their offsets (the negated zero points), a 10 x 10-bit product in LUT fabric, requantized as
//   requantize_fixed_point. Contract: -127 <= a_offset, b_offset <= 128 (int8 zero points), 2 <= shift <= 62.
typedef Int<10> MulOffsetValue;
typedef Int<19> MulOffsetProduct;

template <bool DoubleRound>
inline int8_t mul_fixed_point(int8_t a, int8_t b, int32_t a_offset, int32_t b_offset, int32_t multiplier, int shift,
                              int32_t zero_point, int32_t qmin, int32_t qmax) {
    const MulOffsetValue x = a + a_offset, y = b + b_offset;
    const MulOffsetProduct product = x * y;
    MING_BIND_MUL(product, fabric)
    return requantize_fixed_point<DoubleRound>(static_cast<int32_t>(product), multiplier, shift, zero_point, qmin,
                                               qmax);
}

// numerics.requantize_narrow: TFLite's requantization (requantize_fixed_point, or LiteRT's FULLY_CONNECTED
//   float rounding) by constants numerics.narrow_constants proved equal to it over every int32 accumulator:
//   y = sat((((clamp(acc, low, high) - center) * multiplier + (acc < 0 ? rounding_negative : rounding)) >> shift)
//   + zero_point). The centred accumulator has OperandBits bits (signed), the multiplier 26 (unsigned): with 18,
//   one DSP48E2 multiply (27 x 18 bits, AMD UG579) with the rounding in its post-adder; with 27, two. The sum has
//   48 bits; low, high, center and shift are constants of the process (the shift is wiring). The template argument
//   M places the product as in requantize_lean. The shifted sum (the level before the zero point) has LevelBits
//   bits (NarrowRequant.level_bits: its extremes are at low and high), so synthesis compares and adds in that
//   width, not 48 bits. Contract: low <= high, [low, high] within OperandBits bits around center,
//   multiplier < 2^26, |sum| < 2^47, the level within LevelBits bits, zero_point, qmin, qmax within 9 bits.
template <int Bits> struct NarrowInt { typedef Int<Bits> type; };
template <int Bits> struct NarrowUint { typedef UInt<Bits> type; };
// an unsigned value of `Bits` bits carried by no register (a field of a table's word)
template <int Bits> using narrow_uint = typename NarrowUint<Bits>::type;
typedef NarrowUint<26>::type NarrowMultiplier;
typedef NarrowInt<48>::type NarrowSum;

// the DSP48E2's post-adder: a 48-bit sum that wraps
inline NarrowSum narrow_add(NarrowSum product, NarrowSum rounding) { return wrap_to<48>(product + rounding); }

template <Multiplier M>
struct NarrowProduct;

template <>
struct NarrowProduct<Multiplier::dsp> {
    template <typename Operand>
    static NarrowSum sum(Operand operand, NarrowMultiplier multiplier, NarrowSum rounding) {
        const NarrowSum product = operand * multiplier;
        MING_BIND_MUL(product, dsp)
        return narrow_add(product, rounding);
    }
};

template <>
struct NarrowProduct<Multiplier::fabric> {
    template <typename Operand>
    static NarrowSum sum(Operand operand, NarrowMultiplier multiplier, NarrowSum rounding) {
        const NarrowSum product = operand * multiplier;
        MING_BIND_MUL(product, fabric)
        return narrow_add(product, rounding);
    }
};

template <Multiplier M = Multiplier::dsp, int OperandBits = 18, int LevelBits = 48>
inline int8_t requantize_narrow(int32_t acc, uint32_t multiplier, NarrowSum rounding_negative, NarrowSum rounding,
                                int shift, int32_t low, int32_t high, int32_t center, int32_t zero_point,
                                int32_t qmin, int32_t qmax) {
    typedef typename NarrowInt<OperandBits>::type Operand;
    const int32_t clamped = acc < low ? low : (acc > high ? high : acc);
    const Operand operand = wrap_to<OperandBits>(Int<33>(clamped) - center);
    const NarrowMultiplier factor = multiplier & 0x3FFFFFFu;
    const NarrowSum sum = NarrowProduct<M>::sum(operand, factor, acc < 0 ? rounding_negative : rounding);
    const int s = shift < 0 ? 0 : (shift > 47 ? 47 : shift);
    // the zero point and the bounds have 9 bits (int8 and uint8 outputs): one bit above the wider of the two
    constexpr int ShiftedBits = (LevelBits > 9 ? LevelBits : 9) + 1;
    const Int<LevelBits> level = wrap_to<LevelBits>(sum >> s);
    const Int<ShiftedBits> shifted = level + Int<9>(zero_point);
    const Int<ShiftedBits> low_end(qmin), high_end(qmax);
    return static_cast<int8_t>(shifted < low_end ? low_end : (shifted > high_end ? high_end : shifted));
}

// TFLite's MUL (mul_fixed_point) with its requantization by the narrow datapath (requantize_narrow, constants of
//   the process that numerics.narrow_fixed_point proved equal to the rule over every int32 value): the 10 x 10-bit
//   product in LUT fabric is the accumulator.
template <Multiplier M, int OperandBits, int LevelBits>
inline int8_t mul_narrow(int8_t a, int8_t b, int32_t a_offset, int32_t b_offset, uint32_t multiplier,
                         NarrowSum rounding_negative, NarrowSum rounding, int shift, int32_t low, int32_t high,
                         int32_t center, int32_t zero_point, int32_t qmin, int32_t qmax) {
    const MulOffsetValue x = a + a_offset, y = b + b_offset;
    const MulOffsetProduct product = x * y;
    MING_BIND_MUL(product, fabric)
    return requantize_narrow<M, OperandBits, LevelBits>(static_cast<int32_t>(product), multiplier, rounding_negative,
                                                        rounding, shift, low, high, center, zero_point, qmin, qmax);
}

// reference.bilinear_resize (TFLite's RESIZE_BILINEAR, LiteRT's reference_ops::ResizeBilinearInteger), one value:
//   round(top0 wy0 wx0 + top1 wy0 wx1 + bottom0 wy1 wx0 + bottom1 wy1 wx1) / 2^20, half away from zero, computed
//   as two interpolations across and one down, each (v0 << 10) + (v1 - v0) * w1: equal, as w0 + w1 = 1024. `across`
//   (wx1) and `down` (wy1) lie in [0, 1023], or in [-1024, 1023] where the two columns (rows) are one
//   (ming_py.kinds.bilinear.table_problem), so a row across is a convex combination of int8 values times 1024
//   (18 bits signed) and the sum one of those times 1024 (28 bits); the result fits int8. Three products bound to
//   DSP48E2 (9 x 11, 9 x 11 and 19 x 11 bits; benchmarks/calibration/bilinear_lane.v is this datapath).
namespace widths {
struct bilinear_lane {
    static constexpr long long kWeightMin = -1024, kWeightMax = 1023;  // in 1/1024
    static constexpr long long kStepMax = 255;  // v1 - v0 of int8 values
    static constexpr long long kAcrossProductMax = kStepMax * 1024;
    static constexpr long long kAcrossMin = -128 * 1024, kAcrossMax = 127 * 1024;  // a convex combination, x 1024
    static constexpr long long kDownStepMax = kAcrossMax - kAcrossMin;
    static constexpr long long kDownProductMax = kDownStepMax * 1024;
    static constexpr long long kSumMin = kAcrossMin * 1024, kSumMax = kAcrossMax * 1024;  // in 1/2^20
    typedef int_for<kWeightMin, kWeightMax> Weight;
    typedef int_for<-kStepMax, kStepMax> Step;
    typedef int_for<-kAcrossProductMax, kAcrossProductMax> AcrossProduct;
    typedef int_for<kAcrossMin, kAcrossMax> Across;
    typedef int_for<-kDownStepMax, kDownStepMax> DownStep;
    typedef int_for<-kDownProductMax, kDownProductMax> DownProduct;
    typedef int_for<kSumMin, kSumMax + 524288> Sum;  // and its rounding's half
    static constexpr int WEIGHT_BITS = Weight::width;
    static constexpr int STEP_BITS = Step::width;
    static constexpr int ACROSS_PRODUCT_BITS = AcrossProduct::width;
    static constexpr int ACROSS_BITS = Across::width;
    static constexpr int DOWN_STEP_BITS = DownStep::width;
    static constexpr int DOWN_PRODUCT_BITS = DownProduct::width;
    static constexpr int SUM_BITS = Sum::width;
};
}  // namespace widths

typedef widths::bilinear_lane::Weight BilinearWeight;  // a weight in 1/1024
typedef widths::bilinear_lane::Across BilinearAcross;  // a row across, in 1/1024

inline BilinearAcross bilinear_across(int8_t v0, int8_t v1, BilinearWeight w1) {
    const widths::bilinear_lane::Step step = v1 - v0;
    const widths::bilinear_lane::AcrossProduct product = step * w1;
    MING_BIND_MUL(product, dsp)
    return BilinearAcross(v0) * 1024 + product;
}

inline int8_t bilinear(int8_t top0, int8_t top1, int8_t bottom0, int8_t bottom1, BilinearWeight across,
                       BilinearWeight down) {
    typedef widths::bilinear_lane W;
    const BilinearAcross top = bilinear_across(top0, top1, across);
    const BilinearAcross bottom = bilinear_across(bottom0, bottom1, across);
    const W::DownStep step = bottom - top;
    const W::DownProduct product = step * down;
    MING_BIND_MUL(product, dsp)
    const W::Sum sum = W::Sum(top) * 1024 + product;  // in 1/2^20
    // (sum + 2^19 (sum > 0) or - 2^19 (else)) / 2^20 toward zero is floor((sum + 2^19 - (sum <= 0)) / 2^20)
    const W::Sum rounded = sum + (sum > 0 ? 524288 : 524287);
    return static_cast<int8_t>(rounded >> 20);  // arithmetic (ap_int's; g++'s on the checked class's long long)
}

}  // namespace ming

#endif  // MING_NUMERICS_H
