// fuzz_common.hpp — what the libFuzzer targets in fuzz/ share: a check that
// aborts (libFuzzer then saves the input as a crash artifact) and the
// request fingerprint fuzz_reply decides with, which fuzz/make_seeds.cpp also
// writes into the seed records so the fuzzer starts on every decision.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "fingerprint.hpp"

#define FUZZ_CHECK(cond)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                         #cond);                                                \
            std::abort();                                                       \
        }                                                                       \
    } while (0)

namespace fuzz {

// 0x00 0x01 ... 0x1f
inline idem::Digest fixed_digest() noexcept
{
    idem::Digest d{};
    for (std::size_t i = 0; i < d.size(); ++i) {
        d[i] = static_cast<std::uint8_t>(i);
    }
    return d;
}

}  // namespace fuzz
