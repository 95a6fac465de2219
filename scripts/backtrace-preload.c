/* Names where a hung process waits, or where one crashes, on a machine
 * without a debugger.
 *
 *   cc -shared -fPIC -O1 -o backtrace-preload.so scripts/backtrace-preload.c
 *   LD_PRELOAD=$PWD/backtrace-preload.so BACKTRACE_DIR=/tmp/bt program &
 *   kill -USR1 <pid of the hung process or of one of its threads>
 *
 * The thread that takes SIGUSR1 writes its stack, as glibc's backtrace sees
 * it, to BACKTRACE_DIR/<pid>-<tid>.txt (default /tmp), then goes on waiting.
 * Functions exported by shared libraries (a Halide runtime's are) come with
 * their names; static ones with their library and offset. A child process
 * inherits the preload, so a suite worker can be reached the same way.
 * SIGABRT and SIGSEGV write the crashing thread's stack the same way, to
 * <pid>-<tid>-crash.txt, and then kill the process as they would have.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void write_stack(const char *suffix) {
    void *frames[128];
    int n = backtrace(frames, 128);
    const char *dir = getenv("BACKTRACE_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%d-%ld%s.txt", dir ? dir : "/tmp", (int)getpid(),
             (long)syscall(SYS_gettid), suffix);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        return;
    }
    backtrace_symbols_fd(frames, n, fd);
    close(fd);
}

static void on_usr1(int sig) {
    (void)sig;
    write_stack("");
}

static void on_crash(int sig) {
    write_stack("-crash");
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGABRT, &sa, NULL);
    sigaction(SIGSEGV, &sa, NULL);
}
