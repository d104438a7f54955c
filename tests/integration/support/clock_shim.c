/* An LD_PRELOAD shim that steps a redis-server's wall clock: CLOCK_REALTIME,
 * gettimeofday and time read the real clock plus the offset (ms, a signed
 * decimal) written in the file $RLOCK_CLOCK_SHIM_FILE, read again at most
 * every 5 ms. libfaketime does not load into Debian's jemalloc-linked
 * redis-server; this uses raw system calls only (no malloc, no stdio). The
 * monotonic clocks are left alone, as a real clock step leaves them. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ns;
static long long checked_ns = -1;

static long long now_ns(clockid_t id) {
    struct timespec t;
    syscall(SYS_clock_gettime, id, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void refresh(void) {
    long long now = now_ns(CLOCK_MONOTONIC);
    if (checked_ns >= 0 && now - checked_ns < 5000000LL) return;
    checked_ns = now;
    const char *path = getenv("RLOCK_CLOCK_SHIM_FILE");
    if (!path) return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[32];
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    if (n <= 0) return;
    buf[n] = 0;
    long long ms = 0;
    int neg = 0, i = 0;
    if (buf[0] == '-') { neg = 1; i = 1; }
    for (; buf[i] >= '0' && buf[i] <= '9'; i++) ms = ms * 10 + (buf[i] - '0');
    offset_ns = (neg ? -ms : ms) * 1000000LL;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    long rc = syscall(SYS_clock_gettime, id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        refresh();
        long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns;
        ts->tv_sec = t / 1000000000LL;
        ts->tv_nsec = t % 1000000000LL;
    }
    return (int)rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
