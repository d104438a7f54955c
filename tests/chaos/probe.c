// The probe: COMMAND under the lock. One line per event, each one write(2) on
// an O_APPEND descriptor, times from CLOCK_MONOTONIC (Python's monotonic_ns):
//   start RUN NS PID FENCE LOCK
//   term  RUN NS PID            (SIGTERM received)
//   end   RUN NS PID [term]     (about to exit; none when SIGKILLed)
// argv: LOG RUN HOLD_MS GRACE_MS. It holds HOLD_MS, or on SIGTERM shuts down
// after GRACE_MS (0: at once). SIGTERM is blocked and taken by sigtimedwait,
// so no signal can slip in between a check and a sleep.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fd;
static const char *run_id;

static long long mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void put(char *buf, size_t *len, const char *s, size_t max) {
    while (*s && *len < max) buf[(*len)++] = *s++;
}

static void put_num(char *buf, size_t *len, long long n) {
    char tmp[24];
    int i = 0;
    do { tmp[i++] = (char)('0' + n % 10); n /= 10; } while (n > 0);
    while (i) buf[(*len)++] = tmp[--i];
}

static void event(const char *what, const char *extra) {
    char buf[1024];
    size_t len = 0;
    long long now = mono();
    put(buf, &len, what, 16);
    buf[len++] = ' ';
    put(buf, &len, run_id, 200);
    buf[len++] = ' ';
    put_num(buf, &len, now);
    buf[len++] = ' ';
    put_num(buf, &len, (long long)getpid());
    if (extra) {
        buf[len++] = ' ';
        put(buf, &len, extra, 1000);
    }
    buf[len++] = '\n';
    if (write(fd, buf, len) < 0) _exit(3);
}

static void sleep_until(long long until) {
    struct timespec t = { until / 1000000000LL, until % 1000000000LL };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {}
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    run_id = argv[2];
    long long hold = atoll(argv[3]) * 1000000LL, grace = atoll(argv[4]) * 1000000LL;
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return 3;
    const char *fence = getenv("RLOCK_FENCE"), *name = getenv("RLOCK_NAME");
    char extra[600];
    size_t len = 0;
    put(extra, &len, fence && *fence ? fence : "-", 40);
    extra[len++] = ' ';
    put(extra, &len, name && *name ? name : "-", 500);
    extra[len] = 0;
    event("start", extra);
    long long deadline = mono() + hold;
    for (;;) {
        long long left = deadline - mono();
        if (left <= 0) break;
        struct timespec t = { left / 1000000000LL, left % 1000000000LL };
        int sig = sigtimedwait(&term, NULL, &t);
        if (sig == SIGTERM) {
            event("term", NULL);
            sleep_until(mono() + grace);
            event("end", "term");
            return 143;
        }
        if (sig < 0 && errno == EAGAIN) break;
    }
    event("end", NULL);
    return 0;
}
