/* librdkafka's mock cluster in a process of its own, for benchmarks/produce.py.
 *
 * With `test.mock.num.brokers` the mock runs inside the client's process, so its
 * CPU time cannot be told from the client's. This program starts the same mock
 * (rd_kafka_mock_cluster_new, librdkafka's rdkafka_mock.h), creates the topics
 * named on the command line, prints the bootstrap servers on one line and runs
 * until stdin closes or SIGINT/SIGTERM arrives; the benchmark reads its CPU time
 * from /proc.
 *
 *     mock_cluster BROKERS [TOPIC:PARTITIONS ...]
 *
 * It is linked against the librdkafka that confluent-kafka's wheel bundles (the
 * one the in-process mock was), which ships no headers: the few public functions
 * used are declared here as rdkafka.h and rdkafka_mock.h declare them. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_mock_cluster_s rd_kafka_mock_cluster_t;
typedef enum { RD_KAFKA_PRODUCER, RD_KAFKA_CONSUMER } rd_kafka_type_t;
typedef enum { RD_KAFKA_CONF_OK = 0 } rd_kafka_conf_res_t;
typedef int rd_kafka_resp_err_t;

rd_kafka_conf_t *rd_kafka_conf_new(void);
rd_kafka_conf_res_t rd_kafka_conf_set(rd_kafka_conf_t *conf, const char *name,
                                      const char *value, char *errstr, size_t errstr_size);
rd_kafka_t *rd_kafka_new(rd_kafka_type_t type, rd_kafka_conf_t *conf, char *errstr,
                         size_t errstr_size);
void rd_kafka_destroy(rd_kafka_t *rk);
rd_kafka_mock_cluster_t *rd_kafka_mock_cluster_new(rd_kafka_t *rk, int broker_cnt);
void rd_kafka_mock_cluster_destroy(rd_kafka_mock_cluster_t *mcluster);
const char *rd_kafka_mock_cluster_bootstraps(const rd_kafka_mock_cluster_t *mcluster);
rd_kafka_resp_err_t rd_kafka_mock_topic_create(rd_kafka_mock_cluster_t *mcluster,
                                               const char *topic, int partition_cnt,
                                               int replication_factor);

static volatile sig_atomic_t stopping;

static void on_signal(int sig) {
        (void)sig;
        stopping = 1;
}

int main(int argc, char **argv) {
        char errstr[512];
        if (argc < 2 || atoi(argv[1]) < 1) {
                fprintf(stderr, "usage: %s BROKERS [TOPIC:PARTITIONS ...]\n", argv[0]);
                return 2;
        }
        int brokers = atoi(argv[1]);
        /* The handle only hosts the cluster (logging, its thread); it produces nothing. */
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        if (rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
                fprintf(stderr, "%s\n", errstr);
                return 1;
        }
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        if (!rk) {
                fprintf(stderr, "rd_kafka_new: %s\n", errstr);
                return 1;
        }
        rd_kafka_mock_cluster_t *mcluster = rd_kafka_mock_cluster_new(rk, brokers);
        if (!mcluster) {
                fprintf(stderr, "rd_kafka_mock_cluster_new failed\n");
                return 1;
        }
        for (int i = 2; i < argc; i++) {
                char *colon = strrchr(argv[i], ':');
                if (!colon || atoi(colon + 1) < 1) {
                        fprintf(stderr, "bad topic %s, expected TOPIC:PARTITIONS\n", argv[i]);
                        return 2;
                }
                *colon = '\0';
                /* Replication as the mock's auto-created topics get it: one per broker, up to 3. */
                int rf = brokers < 3 ? brokers : 3;
                rd_kafka_resp_err_t err =
                    rd_kafka_mock_topic_create(mcluster, argv[i], atoi(colon + 1), rf);
                if (err) {
                        fprintf(stderr, "creating topic %s: error %d\n", argv[i], err);
                        return 1;
                }
        }

        /* No SA_RESTART: a signal interrupts the read below. */
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);

        printf("%s\n", rd_kafka_mock_cluster_bootstraps(mcluster));
        fflush(stdout);

        char buf[256];
        while (!stopping) {
                ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
                if (n == 0 || (n < 0 && errno != EINTR))
                        break;
        }
        rd_kafka_mock_cluster_destroy(mcluster);
        rd_kafka_destroy(rk);
        return 0;
}
