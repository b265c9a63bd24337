/*
 * The guardian's waiting life as a small program: what
 * wrapper/process/guardian_waiter.py does while a run goes on, for a
 * fraction of the memory a Python process takes (no interpreter, no
 * relocated libpython).
 *
 * wrapper.process.guardian execs it in the process the runner started,
 * once that process has forked the worker (same pid, the worker its child,
 * the child-subreaper flag kept, the stop signals blocked), as
 *
 *     _waiter WORKER FD COUNT CLEANUP_1 ... CLEANUP_COUNT ARGV...
 *
 * WORKER is the worker's pid, FD the read end of the pipe the worker
 * announces its runs on, CLEANUP the command line that starts
 * guardian_waiter.py (COUNT words), ARGV the run's own command line, there
 * only to show in ps.
 *
 * It passes the stop signals (SIGTERM, SIGINT, SIGHUP, SIGQUIT) on to the
 * worker as they come, reads the announcement until the worker closes the
 * pipe or dies, and waits for the worker. A worker that exited and left no
 * process behind is followed at once with its exit status. Otherwise (the
 * worker died by a signal, or processes are left) the Python cleanup is
 * exec'd in this process's place, the same pid keeping the run's processes
 * as its children:
 *
 *     CLEANUP_1 ... CLEANUP_COUNT --waited WORKER STATUS FD2 ARGV...
 *
 * STATUS is the worker's wait status, FD2 the announcement to be read to
 * its end (a pipe, or a file in memory where it does not fit in one).
 *
 * C99 and POSIX, with Linux's prctl for the subreaper flag.
 */
#define _XOPEN_SOURCE 700
/* For syscall(), to make a file in memory (memfd_create). */
#define _DEFAULT_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the announcement buffer starts at: one run's record (id, directory,
 * result path) fits; a batch's grow it by doubling. */
#define ANNOUNCEMENT_START 4096
/* Read into when the buffer cannot grow: the pipe is still drained, so the
 * worker never blocks on it. */
#define SCRATCH_SIZE 4096
/* Room for a pid, a wait status or a descriptor in decimal. */
#define NUMBER_SIZE 24

static const int stop_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
#define STOP_SIGNAL_COUNT (sizeof stop_signals / sizeof stop_signals[0])

/* Set once, before the handlers are installed. */
static pid_t worker;

struct announcement {
    char *data;
    size_t size;
    size_t used;
    /* What could not be kept for want of memory: the runs in it are not handed on. */
    size_t lost;
};

static void forward(int signum) {
    int saved = errno;
    kill(worker, signum);
    errno = saved;
}

static void say(const char *what, const char *detail) {
    fprintf(stderr, "agent-wrapper: guardian: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
}

/* A non-negative decimal that fits an int, or -1. */
static long parse_count(const char *text) {
    char *end;
    long value;
    errno = 0;
    value = strtol(text, &end, 10);
    if (errno || end == text || *end || value < 0 || value > INT32_MAX) {
        return -1;
    }
    return value;
}

static void stop_signal_set(sigset_t *set) {
    size_t i;
    sigemptyset(set);
    for (i = 0; i < STOP_SIGNAL_COUNT; i++) {
        sigaddset(set, stop_signals[i]);
    }
}

static void set_stop_handlers(void (*handler)(int)) {
    struct sigaction action;
    size_t i;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    /* The reads and the wait go on across a forwarded signal. */
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (i = 0; i < STOP_SIGNAL_COUNT; i++) {
        sigaction(stop_signals[i], &action, NULL);
    }
}

/* Read FD to its end (the worker closed it, or died), keeping what it held. */
static void read_announcement(int fd, struct announcement *out) {
    char scratch[SCRATCH_SIZE];
    for (;;) {
        char *into = scratch;
        size_t room = sizeof scratch;
        ssize_t got;
        if (!out->lost) {
            if (out->used == out->size) {
                size_t grown = out->size ? out->size * 2 : ANNOUNCEMENT_START;
                char *bigger = grown > out->size ? realloc(out->data, grown) : NULL;
                if (bigger) {
                    out->data = bigger;
                    out->size = grown;
                }
            }
            if (out->used < out->size) {
                into = out->data + out->used;
                room = out->size - out->used;
            }
        }
        got = read(fd, into, room);
        if (got > 0) {
            if (into == scratch) {
                out->lost += (size_t)got;
            } else {
                out->used += (size_t)got;
            }
        } else if (got == 0 || errno != EINTR) {
            break;
        }
    }
    close(fd);
}

/* Wait for the worker to end; returns its wait status. */
static int wait_for_worker(void) {
    siginfo_t info;
    sigset_t stops;
    int status = SIGKILL; /* as a worker killed, should waitpid fail (it cannot: it is our child) */
    pid_t reaped;
    /* Ended, not yet reaped: its pid cannot go to another process while a
     * stop signal may still be passed on to it. */
    while (waitid(P_PID, (id_t)worker, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    stop_signal_set(&stops);
    sigprocmask(SIG_BLOCK, &stops, NULL);
    do {
        reaped = waitpid(worker, &status, 0);
    } while (reaped < 0 && errno == EINTR);
    return status;
}

/* Reap what the worker left that has exited already (its status is nobody's). */
static void reap_the_dead(void) {
    int ignored;
    while (waitpid(-1, &ignored, WNOHANG) > 0) {
    }
}

/* Whether any process is still this one's child (unknown counts as yes:
 * the cleanup then looks for itself). */
static int has_children(void) {
    char path[64];
    char text[256];
    ssize_t got;
    int fd;
    snprintf(path, sizeof path, "/proc/self/task/%ld/children", (long)getpid());
    do {
        fd = open(path, O_RDONLY);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        return 1;
    }
    do {
        got = read(fd, text, sizeof text);
    } while (got < 0 && errno == EINTR);
    close(fd);
    return got != 0;
}

/* Write all of DATA to FD; returns how much went (less where FD would block). */
static size_t write_all(int fd, const char *data, size_t size) {
    size_t done = 0;
    while (done < size) {
        ssize_t wrote = write(fd, data + done, size - done);
        if (wrote > 0) {
            done += (size_t)wrote;
        } else if (wrote < 0 && errno != EINTR) {
            break;
        }
    }
    return done;
}

/* A file in memory holding DATA, read from its start and kept across exec;
 * -1 where the system has none. Needs no writable directory: /tmp may be
 * read-only (a container's read-only root). */
static int memory_file(const char *data, size_t size) {
#ifdef SYS_memfd_create
    int fd = (int)syscall(SYS_memfd_create, "agent-wrapper-announcement", 0U);
    if (fd < 0) {
        return -1;
    }
    if (write_all(fd, data, size) == size && lseek(fd, 0, SEEK_SET) == 0) {
        return fd;
    }
    close(fd);
#else
    (void)data;
    (void)size;
#endif
    return -1;
}

/* A descriptor the cleanup reads the announcement from: a pipe when it fits
 * in one (the usual case), else a file in memory, else an unlinked
 * temporary file, else the pipe with what fitted (whole runs in it are
 * still ended). -1 when not even a pipe could be made. */
static int hand_over(const struct announcement *announced) {
    int ends[2] = {-1, -1};
    size_t fitted = 0;
    FILE *file;
    int fd;
    if (pipe(ends) == 0) {
        int flags = fcntl(ends[1], F_GETFL);
        if (flags >= 0 && fcntl(ends[1], F_SETFL, flags | O_NONBLOCK) == 0) {
            fitted = write_all(ends[1], announced->data, announced->used);
        }
        close(ends[1]);
        if (fitted == announced->used) {
            return ends[0];
        }
    }
    fd = memory_file(announced->data, announced->used);
    if (fd >= 0) {
        if (ends[0] >= 0) {
            close(ends[0]);
        }
        return fd;
    }
    file = tmpfile();
    if (file) {
        fd = fileno(file);
        if (write_all(fd, announced->data, announced->used) == announced->used
            && lseek(fd, 0, SEEK_SET) == 0 && fcntl(fd, F_SETFD, 0) == 0) {
            if (ends[0] >= 0) {
                close(ends[0]);
            }
            return fd; /* the stream is left open: its descriptor is what goes on */
        }
        fclose(file);
    }
    say(ends[0] >= 0 ? "the runs announced could not all be handed to the cleanup (no file in "
                       "memory nor temporary file could be made); those announced last may be "
                       "left without a result"
                     : "the runs announced could not be handed to the cleanup (no pipe, no file "
                       "in memory nor temporary file); their processes may be left running",
        NULL);
    return ends[0];
}

int main(int argc, char **argv) {
    long worker_arg, fd_arg, count;
    struct announcement announced = {NULL, 0, 0, 0};
    sigset_t stops;
    int status, fd;
    char worker_text[NUMBER_SIZE], status_text[NUMBER_SIZE], fd_text[NUMBER_SIZE];
    static char waited[] = "--waited";
    char **cleanup;
    int rest, i, at;
    size_t s;

    if (argc < 5 || (worker_arg = parse_count(argv[1])) <= 0 || (fd_arg = parse_count(argv[2])) < 0
        || (count = parse_count(argv[3])) < 1 || count > argc - 4) {
        say("the waiter was started with arguments it does not understand "
            "(expected WORKER FD COUNT CLEANUP... ARGV...)",
            NULL);
        return 2;
    }
    worker = (pid_t)worker_arg;
    /* A runner that ignores SIGCHLD would have the worker reaped before it is waited for. */
    signal(SIGCHLD, SIG_DFL);
    /* Kept across exec already; asked again in case the exec came from elsewhere. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    /* Blocked since before the exec: what came meanwhile is delivered now. */
    set_stop_handlers(forward);
    stop_signal_set(&stops);
    sigprocmask(SIG_UNBLOCK, &stops, NULL);

    read_announcement((int)fd_arg, &announced);
    status = wait_for_worker();
    /* Nothing left to pass them on to, and the cleanup is not to be cut short. */
    for (s = 0; s < STOP_SIGNAL_COUNT; s++) {
        signal(stop_signals[s], SIG_IGN);
    }
    sigprocmask(SIG_UNBLOCK, &stops, NULL);
    reap_the_dead();
    if (WIFEXITED(status) && !has_children()) {
        _exit(WEXITSTATUS(status));
    }

    if (announced.lost) {
        say("the runs announced last could not be kept (out of memory); they may be left "
            "without a result",
            NULL);
    }
    fd = hand_over(&announced);
    snprintf(worker_text, sizeof worker_text, "%ld", (long)worker);
    snprintf(status_text, sizeof status_text, "%d", status);
    snprintf(fd_text, sizeof fd_text, "%d", fd);
    rest = argc - 4 - (int)count;
    cleanup = malloc(sizeof(char *) * ((size_t)count + 4 + (size_t)rest + 1));
    if (cleanup) {
        at = 0;
        for (i = 0; i < count; i++) {
            cleanup[at++] = argv[4 + i];
        }
        cleanup[at++] = waited;
        cleanup[at++] = worker_text;
        cleanup[at++] = status_text;
        cleanup[at++] = fd_text;
        for (i = 0; i < rest; i++) {
            cleanup[at++] = argv[4 + count + i];
        }
        cleanup[at] = NULL;
        execv(cleanup[0], cleanup);
        say("could not start the run's cleanup; its processes may be left running and its "
            "result unwritten",
            strerror(errno));
    } else {
        say("could not start the run's cleanup (out of memory); its processes may be left running",
            NULL);
    }
    _exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
}
