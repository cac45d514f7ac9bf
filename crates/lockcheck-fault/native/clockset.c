/*
 * lockcheck-clockset: writes a clock page on the host of a node the `ssh`
 * runtime started (src/fault/clock/remote.rs copies it there with the
 * interposer, and runs it over SSH). The controller cannot map a file of
 * another machine, and that machine's clocks are not the controller's: a
 * rate's base must be the host's own "now", taken here at the very moment the
 * skew is published.
 *
 *     lockcheck-clockset PAGE
 *         creates PAGE unskewed, unless it is there (a restarted node keeps
 *         the skew in effect);
 *     lockcheck-clockset PAGE OFFSET_NS OFFSET2_NS PERIOD_NS RATE
 *         changes the skew: first the drift its rate has built up so far is
 *         folded into its offset and its base moved to now (the skewed clock
 *         stays continuous, as page.rs's `rebase`), then each field given is
 *         set, each `-` kept; prints whether the page held a skew before
 *         ("skewed", also for a page torn by a writer that died mid-write) or
 *         not ("unskewed"). `PAGE 0 0 0 1` is the reset. One SSH round trip
 *         per change, whatever the skew in effect.
 *
 * The write is page.rs's `publish`, the seqlock the interposer reads under: a
 * `seq` found odd (a writer that died midway) is taken over and ended with the
 * next even value. Exit status 3: there is no page (the node was started
 * without the interposer).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "clockpage.h"

static int64_t now_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Field `s` of the command line: a whole number, or `-` (keep: 0 returned). */
static int arg_i64(const char *s, const char *what, int64_t *out)
{
    if (strcmp(s, "-") == 0)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s) {
        fprintf(stderr, "lockcheck-clockset: %s is no integer: %s\n", what, s);
        exit(2);
    }
    *out = v;
    return 1;
}

static volatile struct lc_page *map(int fd, const char *path)
{
    void *p = mmap(NULL, sizeof(struct lc_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        fprintf(stderr, "lockcheck-clockset: mapping %s: %s\n", path, strerror(errno));
        exit(1);
    }
    return p;
}

struct skew {
    int64_t offset, offset2, period, base_rt, base_mono;
    double rate;
};

static void publish(volatile struct lc_page *pg, const struct skew *k)
{
    uint64_t writing = __atomic_load_n(&pg->seq, __ATOMIC_RELAXED) | 1;
    __atomic_store_n(&pg->seq, writing, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    uint64_t bits;
    memcpy(&bits, &k->rate, sizeof bits);
    pg->offset_ns = k->offset;
    pg->offset2_ns = k->offset2;
    pg->strobe_period_ns = k->period;
    pg->rate_bits = bits;
    pg->base_realtime_ns = k->base_rt;
    pg->base_monotonic_ns = k->base_mono;
    __atomic_store_n(&pg->seq, writing + 1, __ATOMIC_RELEASE);
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 6) {
        fprintf(stderr, "usage: lockcheck-clockset PAGE [OFFSET_NS OFFSET2_NS PERIOD_NS RATE]\n");
        return 2;
    }
    const char *path = argv[1];
    struct skew k = {0, 0, 0, now_ns(CLOCK_REALTIME), now_ns(CLOCK_MONOTONIC), 1.0};
    if (argc == 2) {
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST)
            return 0;
        if (fd < 0 || ftruncate(fd, LC_FILE_LEN) != 0) {
            fprintf(stderr, "lockcheck-clockset: creating %s: %s\n", path, strerror(errno));
            return 1;
        }
        volatile struct lc_page *pg = map(fd, path);
        publish(pg, &k);
        __atomic_store_n(&pg->magic, LC_MAGIC, __ATOMIC_RELEASE);
        return 0;
    }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "lockcheck-clockset: %s: %s\n", path, strerror(errno));
        return errno == ENOENT ? 3 : 1;
    }
    volatile struct lc_page *pg = map(fd, path);
    if (pg->magic != LC_MAGIC) {
        fprintf(stderr, "lockcheck-clockset: %s is not a lockcheck clock page\n", path);
        return 1;
    }
    /* The writer is this program, run one at a time: the fields are whole,
     * unless a writer died mid-write (`seq` odd), whose skew is then reset. */
    int torn = pg->seq & 1;
    uint64_t bits = pg->rate_bits;
    struct skew was = {pg->offset_ns, pg->offset2_ns, pg->strobe_period_ns,
                       pg->base_realtime_ns, pg->base_monotonic_ns, 0};
    memcpy(&was.rate, &bits, sizeof was.rate);
    if (!torn && was.rate > 0.0) {
        k.offset = was.offset + (int64_t)((double)(k.base_mono - was.base_mono) * (was.rate - 1.0));
        k.offset2 = was.offset2;
        k.period = was.period;
        k.rate = was.rate;
    }
    arg_i64(argv[2], "OFFSET_NS", &k.offset);
    arg_i64(argv[3], "OFFSET2_NS", &k.offset2);
    if (arg_i64(argv[4], "PERIOD_NS", &k.period) && k.period < 0) {
        fprintf(stderr, "lockcheck-clockset: PERIOD_NS must not be negative\n");
        return 2;
    }
    if (strcmp(argv[5], "-") != 0) {
        char *end;
        k.rate = strtod(argv[5], &end);
        if (*end || end == argv[5] || !(k.rate > 0.0)) {
            fprintf(stderr, "lockcheck-clockset: RATE must be a positive number: %s\n", argv[5]);
            return 2;
        }
    }
    int skewed = torn || was.offset || was.period || was.rate != 1.0;
    publish(pg, &k);
    puts(skewed ? "skewed" : "unskewed");
    return 0;
}
