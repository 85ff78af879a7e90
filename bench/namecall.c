/* namecall: what the calls that write a name or a message of the C library's into the
 * caller's buffer cost through the allocator's exported ones (crates/nevermore/src/io/fills.rs,
 * which tell them no more than the buffer's heap object holds). N calls of, with "h",
 * gethostname; "s", strerror_r of an unknown error (written into the buffer); "n",
 * getnameinfo of 127.0.0.1 as a number; "c", ctime_r; "x", strxfrm of a 21-character string
 * (in the C locale); into a 256-byte buffer that is a heap object ("heap") or on the stack
 * ("stack"), told 256 bytes.
 * usage: namecall N h|s|n|c|x heap|stack   prints: nanoseconds per call */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netdb.h>
#include <arpa/inet.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]); const char *what = argv[2];
    char *buf = malloc(256), st[256]; char *b = !strcmp(argv[3], "heap") ? buf : st;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(8080)};
    sin.sin_addr.s_addr = htonl(0x7f000001);
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile long s = 0;
    for (long i = 0; i < n; i++) {
        if (what[0] == 'h') s += gethostname(b, 256);
        else if (what[0] == 's') s += (long)strerror_r(12345, b, 256);
        else if (what[0] == 'x') s += (long)strxfrm(b, "collation-source-text", 256);
        else if (what[0] == 'n') s += getnameinfo((struct sockaddr *)&sin, sizeof sin, b, 256, NULL, 0, NI_NUMERICHOST);
        else { time_t t = i; s += (long)ctime_r(&t, b); }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    return 0;
}
