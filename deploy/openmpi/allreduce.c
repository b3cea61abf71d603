/* MPI_Allreduce (sum) of a vector of doubles over every rank, checked against its closed form and timed.
 *
 * Rank r contributes (r + 1) * (i + 1) at index i, so every element of the sum over P ranks is
 * (i + 1) * P * (P + 1) / 2: whole numbers, exact in doubles for the sizes used here.
 * Rank 0 prints one line per rank, in rank order, then a summary with the algorithm bandwidth (bytes / time of one
 * allreduce, as nccl-tests' algbw) and the bus bandwidth (algbw * 2 (P - 1) / P, a ring's traffic per link).
 * Exit status: 0 when every rank's result is right, 1 when any is wrong, 2 on bad arguments.
 */
#include <getopt.h>
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ELEMENTS INT_MAX

struct rank_report {
    char host[MPI_MAX_PROCESSOR_NAME];
    double seconds; /* mean time of one allreduce */
    int ok;
};

struct options {
    long elements;
    long iterations;
    long warmup;
    double expected_offset;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: allreduce [--elements N] [--iterations N] [--warmup N] [--expected-offset X]\n"
            "  --elements N         doubles per rank (default 1048576, 8 MiB)\n"
            "  --iterations N       timed allreduces (default 20)\n"
            "  --warmup N           untimed allreduces before them (default 5)\n"
            "  --expected-offset X  add X to every expected sum: a self-test that a wrong result fails (default 0)\n");
}

/* Every rank parses the same arguments and so fails alike; only rank 0 says why. */
static int speaks;

static void complain(const char *format, ...)
{
    if (!speaks)
        return;
    va_list arguments;
    va_start(arguments, format);
    fputs("allreduce: ", stderr);
    vfprintf(stderr, format, arguments);
    fputc('\n', stderr);
    va_end(arguments);
}

/* A whole number >= minimum; 0 on success. */
static int parse_count(const char *name, const char *text, long minimum, long *value)
{
    char *end;
    long parsed = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || parsed < minimum) {
        complain("--%s must be a whole number >= %ld, got '%s'", name, minimum, text);
        return -1;
    }
    *value = parsed;
    return 0;
}

/* 0: run; 1: --help was answered; -1: bad arguments. */
static int parse_options(int argc, char **argv, struct options *options)
{
    static const struct option known[] = {
        {"elements", required_argument, NULL, 'n'},
        {"iterations", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},
        {"expected-offset", required_argument, NULL, 'x'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *options = (struct options){.elements = 1L << 20, .iterations = 20, .warmup = 5, .expected_offset = 0.0};
    opterr = speaks;
    int option;
    char *end;
    while ((option = getopt_long(argc, argv, "", known, NULL)) != -1) {
        switch (option) {
        case 'n':
            if (parse_count("elements", optarg, 1, &options->elements) != 0)
                return -1;
            break;
        case 'i':
            if (parse_count("iterations", optarg, 1, &options->iterations) != 0)
                return -1;
            break;
        case 'w':
            if (parse_count("warmup", optarg, 0, &options->warmup) != 0)
                return -1;
            break;
        case 'x':
            options->expected_offset = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0') {
                complain("--expected-offset must be a number, got '%s'", optarg);
                return -1;
            }
            break;
        case 'h':
            if (speaks)
                usage(stdout);
            return 1;
        default:
            if (speaks)
                usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        complain("unexpected argument '%s'", argv[optind]);
        return -1;
    }
    if (options->elements > MAX_ELEMENTS) {
        complain("--elements must be at most %d (an MPI count is an int), got %ld", MAX_ELEMENTS, options->elements);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    speaks = rank == 0;
    struct options options;
    int parsed = parse_options(argc, argv, &options);
    if (parsed != 0) {
        MPI_Finalize();
        return parsed < 0 ? 2 : 0;
    }

    size_t count = (size_t)options.elements;
    double *send = malloc(count * sizeof *send);
    double *receive = malloc(count * sizeof *receive);
    if (send == NULL || receive == NULL) {
        fprintf(stderr, "allreduce: rank %d cannot allocate 2 x %zu bytes\n", rank, count * sizeof *send);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < count; i++)
        send[i] = (double)(rank + 1) * (double)(i + 1);

    for (long i = 0; i < options.warmup; i++)
        MPI_Allreduce(send, receive, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    memset(receive, 0, count * sizeof *receive);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (long i = 0; i < options.iterations; i++)
        MPI_Allreduce(send, receive, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double seconds = (MPI_Wtime() - start) / (double)options.iterations;

    struct rank_report mine = {.seconds = seconds, .ok = 1};
    int length;
    MPI_Get_processor_name(mine.host, &length);
    double rank_sum = (double)size * (double)(size + 1) / 2.0;
    for (size_t i = 0; i < count && mine.ok; i++)
        mine.ok = receive[i] == (double)(i + 1) * rank_sum + options.expected_offset;

    struct rank_report *reports = rank == 0 ? malloc((size_t)size * sizeof *reports) : NULL;
    MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, reports, (int)sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    int all_ok;
    MPI_Allreduce(&mine.ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);

    if (rank == 0) {
        size_t bytes = count * sizeof *send;
        double slowest = 0.0;
        for (int r = 0; r < size; r++) {
            printf("rank=%d host=%s bytes=%zu result=%s time_s=%.6f\n", r, reports[r].host, bytes,
                   reports[r].ok ? "ok" : "FAIL", reports[r].seconds);
            if (reports[r].seconds > slowest)
                slowest = reports[r].seconds;
        }
        /* the collective is done when its slowest rank is */
        double algbw = (double)bytes / slowest / 1e9;
        double busbw = algbw * 2.0 * (size - 1) / size;
        printf("summary ranks=%d bytes=%zu iterations=%ld time_s=%.6f algbw_GBps=%.3f busbw_GBps=%.3f result=%s\n",
               size, bytes, options.iterations, slowest, algbw, busbw, all_ok ? "ok" : "FAIL");
        fflush(stdout);
        free(reports);
    }
    free(send);
    free(receive);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
