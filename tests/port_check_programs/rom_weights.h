// A constant table as ming's <model>_weights.h declares it: a plain array, seen by the port check
// through a ROM view of the same name.
#pragma once

#include <cstdint>
#ifdef MING_CHECK_PORTS
#include "ming_check.h"
namespace ming_rom_data {
#endif

// 4 output rows of 3 weights
static const int8_t weights_demo[4][3] = {{1, -2, 3}, {4, 5, -6}, {-7, 8, 9}, {10, -11, 12}};

#ifdef MING_CHECK_PORTS
}  // namespace ming_rom_data
static const ming_check::Rom<int8_t, 4, 3> weights_demo("weights_demo", ming_rom_data::weights_demo);
#endif
