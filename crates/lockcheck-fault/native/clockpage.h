/*
 * The clock page: what lockcheck's controller (src/fault/clock/page.rs, or
 * clockset.c on a node's host) writes and the interposer (clockshim.c) reads.
 * The same layout as `Page` in src/fault/clock/page.rs (keep them in step).
 */
#ifndef LOCKCHECK_CLOCKPAGE_H
#define LOCKCHECK_CLOCKPAGE_H

#include <stdint.h>

#define LC_MAGIC 0x314b434f4c43434cULL /* the bytes "LCCLOCK1", little-endian */

struct lc_page {
    uint64_t magic;
    uint64_t seq;            /* seqlock: odd while the controller writes */
    int64_t offset_ns;
    int64_t offset2_ns;      /* strobe's other offset */
    int64_t strobe_period_ns;/* 0 = no strobe */
    uint64_t rate_bits;      /* IEEE-754 double; 1.0 = real speed */
    int64_t base_realtime_ns;
    int64_t base_monotonic_ns;
};

/* The file is one page; the interposer maps only struct lc_page. */
#define LC_FILE_LEN 4096

#endif
