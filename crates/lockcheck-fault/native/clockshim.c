/*
 * lockcheck's clock interposer: skews the clocks of ONE process (and its
 * children), live, without touching the machine's clock.
 *
 * Loaded with LD_PRELOAD. It replaces clock_gettime, gettimeofday and time,
 * and reads how to skew them from a small shared page: a file named by
 * LOCKCHECK_CLOCK_FILE, mapped once, written by the controller (Rust:
 * lockcheck::fault::clock). Reading the page is a few loads per call; the
 * file is never re-read (libfaketime's re-reading halves Redis throughput).
 *
 * Why not libfaketime: its start-up resolves the real functions with dlsym
 * while holding a lock, and dlsym mallocs; Redis's jemalloc reads the clock
 * while it initialises, which calls back into the hook and deadlocks. Here,
 * any call made before the real functions are known (or while they are being
 * looked up, from any thread) goes straight to the raw system call, which
 * needs neither malloc nor a lock.
 *
 * Skew, for a clock reading `real` of the realtime or monotonic family:
 *     skewed = real + offset + (real - base) * (rate - 1)
 * i.e. base + (real - base) * rate + offset, with `base` taken when the rate
 * was set so that the clock stays continuous. With strobe on, the offset
 * flips between `offset` and `offset2` every `strobe_period` ns.
 *
 * A writer killed between its two stores of `seq` leaves it odd for good: a
 * reader waits for it at most LC_TORN_NS, then keeps the last skew it read
 * whole (see lc_read), until a reset (`lockcheck recover`) makes it even.
 *
 * The page layout (clockpage.h) is shared with src/fault/clock/page.rs (keep
 * them in step) and written on other hosts by clockset.c.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "clockpage.h"

struct lc_skew {
    int64_t offset, offset2, period, base_rt, base_mono;
    double rate;
};

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

enum { UNINIT = 0, INITIALISING = 1, READY = 2 };
static int state = UNINIT;
static clock_gettime_fn real_clock_gettime;
static const volatile struct lc_page *page;

static int raw_clock_gettime(clockid_t id, struct timespec *ts)
{
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static void lc_init(void)
{
    int expected = UNINIT;
    if (!__atomic_compare_exchange_n(&state, &expected, INITIALISING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return; /* someone else is at it (maybe us, re-entered): use the syscall */
    clock_gettime_fn f = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    const char *path = getenv("LOCKCHECK_CLOCK_FILE");
    if (path && *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            void *p = mmap(NULL, sizeof(struct lc_page), PROT_READ, MAP_SHARED, fd, 0);
            close(fd);
            if (p != MAP_FAILED && ((const struct lc_page *)p)->magic == LC_MAGIC)
                page = p;
            else if (p != MAP_FAILED)
                munmap(p, sizeof(struct lc_page));
        }
    }
    real_clock_gettime = f;
    __atomic_store_n(&state, READY, __ATOMIC_RELEASE);
}

static int lc_real(clockid_t id, struct timespec *ts)
{
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != READY) {
        lc_init();
        if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != READY)
            return raw_clock_gettime(id, ts);
    }
    if (!real_clock_gettime)
        return raw_clock_gettime(id, ts);
    return real_clock_gettime(id, ts);
}

/* How long a reader waits for an odd seq to turn even before it calls the
 * page torn (page.rs's TORN_AFTER is the same bound). A live writer holds seq
 * odd for six stores, unless it is preempted right there: only a dead writer
 * holds it this long. */
#define LC_TORN_NS 100000000LL

/* The odd seq a reader has already waited LC_TORN_NS on: its writer is gone,
 * and later calls use the last good skew at once instead of waiting again. */
static uint64_t torn_seq;

/* The last skew this process read whole, and the page's seq it was read
 * under (0: none yet; a page's seq is 2 or more once it holds a whole skew). A seqlock of its own (`seq`), written by whichever
 * thread first reads a new page seq; a thread that finds another one writing
 * leaves the update to it. Only these two words and the fields are shared, no
 * lock: a clock call may come from a signal handler. */
static struct {
    uint64_t seq;
    uint64_t page_seq;
    int64_t offset, offset2, period, base_rt, base_mono;
    uint64_t rate_bits;
} last;

static uint64_t now_ns(void)
{
    struct timespec t;
    lc_real(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void remember(uint64_t page_seq, const struct lc_skew *s, uint64_t bits)
{
    /* seq only grows: an older snapshot never replaces a newer one. */
    if (__atomic_load_n(&last.page_seq, __ATOMIC_RELAXED) >= page_seq)
        return;
    uint64_t a = __atomic_load_n(&last.seq, __ATOMIC_RELAXED);
    if ((a & 1) || !__atomic_compare_exchange_n(&last.seq, &a, a + 1, 0,
                                                __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&last.offset, s->offset, __ATOMIC_RELAXED);
    __atomic_store_n(&last.offset2, s->offset2, __ATOMIC_RELAXED);
    __atomic_store_n(&last.period, s->period, __ATOMIC_RELAXED);
    __atomic_store_n(&last.base_rt, s->base_rt, __ATOMIC_RELAXED);
    __atomic_store_n(&last.base_mono, s->base_mono, __ATOMIC_RELAXED);
    __atomic_store_n(&last.rate_bits, bits, __ATOMIC_RELAXED);
    __atomic_store_n(&last.page_seq, page_seq, __ATOMIC_RELAXED);
    __atomic_store_n(&last.seq, a + 2, __ATOMIC_RELEASE);
}

/* The last skew read whole; 0 if there is none (or it is being written this
 * very moment, say by the thread a signal handler interrupted). */
static int recall(struct lc_skew *s)
{
    for (int tries = 0; tries < 100; tries++) {
        uint64_t a = __atomic_load_n(&last.seq, __ATOMIC_ACQUIRE);
        if (a & 1)
            continue;
        uint64_t page_seq = __atomic_load_n(&last.page_seq, __ATOMIC_RELAXED);
        s->offset = __atomic_load_n(&last.offset, __ATOMIC_RELAXED);
        s->offset2 = __atomic_load_n(&last.offset2, __ATOMIC_RELAXED);
        s->period = __atomic_load_n(&last.period, __ATOMIC_RELAXED);
        s->base_rt = __atomic_load_n(&last.base_rt, __ATOMIC_RELAXED);
        s->base_mono = __atomic_load_n(&last.base_mono, __ATOMIC_RELAXED);
        uint64_t bits = __atomic_load_n(&last.rate_bits, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&last.seq, __ATOMIC_RELAXED) != a)
            continue;
        if (page_seq == 0)
            return 0;
        memcpy(&s->rate, &bits, sizeof bits);
        return s->offset || s->period || s->rate != 1.0;
    }
    return 0;
}

/* A consistent snapshot of the page (seqlock read); 0 when there is nothing to
 * skew.
 *
 * When the page stays mid-write past LC_TORN_NS, its writer died between its
 * two seq stores (kill -9 of the controller): waiting longer would hang this
 * process in every clock call until `recover`. Then the skew is the last one
 * this process read whole, not the real clock: that is the skew in effect as
 * far as anyone knows (the history says so, and no reset was recorded), and
 * keeping it keeps the process's clocks continuous, where falling back to the
 * real clock would jump them (backwards, for a clock skewed ahead) by a change
 * nobody made; a live writer preempted past the bound (a loaded machine) is
 * read as if its write came a moment later, as the seqlock would anyway. A
 * process that never read the page whole has no skew of its own to keep, and
 * gets the real clock. */
static int lc_read(struct lc_skew *s)
{
    if (!page)
        return 0;
    uint64_t since = 0;
    for (unsigned i = 0;; i++) {
        uint64_t a = __atomic_load_n(&page->seq, __ATOMIC_ACQUIRE);
        if (!(a & 1)) {
            s->offset = page->offset_ns;
            s->offset2 = page->offset2_ns;
            s->period = page->strobe_period_ns;
            uint64_t bits = page->rate_bits;
            s->base_rt = page->base_realtime_ns;
            s->base_mono = page->base_monotonic_ns;
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&page->seq, __ATOMIC_RELAXED) == a) {
                memcpy(&s->rate, &bits, sizeof bits);
                remember(a, s, bits);
                return s->offset || s->period || s->rate != 1.0;
            }
        } else if (a == __atomic_load_n(&torn_seq, __ATOMIC_RELAXED)) {
            return recall(s);
        }
        /* Spin briefly (a live writer is six stores from done), then yield the
         * CPU: on a loaded machine the writer may need it to finish. */
        if (i < 64)
            continue;
        uint64_t now = now_ns();
        if (since == 0)
            since = now;
        else if (now - since > (uint64_t)LC_TORN_NS) {
            if (a & 1)
                __atomic_store_n(&torn_seq, a, __ATOMIC_RELAXED);
            return recall(s);
        }
        sched_yield();
    }
}

static int is_realtime(clockid_t id)
{
    return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

static int is_monotonic(clockid_t id)
{
    return id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE ||
           id == CLOCK_MONOTONIC_RAW || id == CLOCK_BOOTTIME;
}

static void lc_skew(clockid_t id, struct timespec *ts)
{
    struct lc_skew s;
    if (!(is_realtime(id) || is_monotonic(id)) || !lc_read(&s))
        return;
    int64_t real = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
    int64_t base = is_realtime(id) ? s.base_rt : s.base_mono;
    int64_t since = real - base;
    int64_t offset = s.offset;
    if (s.period > 0 && since >= 0 && (since / s.period) % 2 == 1)
        offset = s.offset2;
    int64_t skewed = real + offset + (int64_t)((double)since * (s.rate - 1.0));
    if (skewed < 0)
        skewed = 0;
    ts->tv_sec = skewed / 1000000000LL;
    ts->tv_nsec = skewed % 1000000000LL;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int r = lc_real(id, ts);
    if (r == 0)
        lc_skew(id, ts);
    return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    if (tz) /* obsolete; glibc reports zeros too */
        memset(tz, 0, sizeof(struct timezone));
    struct timespec ts;
    int r = clock_gettime(CLOCK_REALTIME, &ts);
    if (r == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return r;
}

time_t time(time_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
