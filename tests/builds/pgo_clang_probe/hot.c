#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>

int cold_path(int x);           /* in cold.c: linked, called rarely */
static int never(int x) { return x * 7; }   /* instrumented, never runs */

static long sum;
static void *work(void *arg) {
    long n = (long)arg, s = 0;
    for (long i = 0; i < n; i++) s += (i % 3 == 0) ? i : -1;
    __atomic_add_fetch(&sum, s, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, (void *)n);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    if (argc > 5) return never(argc);
    printf("sum=%ld cold=%d\n", sum, cold_path(argc));
    return 0;
}
