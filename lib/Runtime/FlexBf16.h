/*===- FlexBf16.h - bf16 <-> f32 conversions of the runtime ---------------===*
 *
 * The widening is exact; the narrowing rounds to nearest even, as torch's
 * bf16 conversion does, and keeps NaN a (quiet) NaN.
 *
 *===----------------------------------------------------------------------===*/
#ifndef FLEX_RUNTIME_FLEXBF16_H
#define FLEX_RUNTIME_FLEXBF16_H

#include <stdint.h>
#include <string.h>

static inline float flex_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t flex_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

#endif
