# Builds a test runner holding only the librdkafka C tests zonegate runs, plus the
# test framework, against the static librdkafka built beside it: the upstream
# tests/Makefile compiles all ~200 C and C++ tests, most of which need a
# ZooKeeper-era cluster or Kafka's scripts, and takes longer on two cores than
# the tests we want take to run.
#
# make -f runner.mk SRC=<librdkafka source> OUT=<build dir> [TESTS_C="0077-compaction ..."]
# The runner's table of tests (tests/test.c) names every test; the ones not built
# here get a stub that fails if it is ever selected, so a wrong TESTS= cannot pass.

# This file, before any include: a change to it rebuilds everything.
RUNNER_MK := $(lastword $(MAKEFILE_LIST))
SRC ?= $(error SRC: the librdkafka source directory)
OUT ?= $(error OUT: the build directory)
TESTS_C ?= 0077-compaction 0081-admin 0103-transactions 0129-fetch_aborted_msgs

include $(SRC)/Makefile.config

T := $(SRC)/tests
# The numbers of the tests built, as an extended regex over the table's names.
empty :=
BUILT := $(subst $(empty) $(empty),|,$(foreach t,$(TESTS_C),$(firstword $(subst -, ,$(t)))))
FRAMEWORK := test rusage sockem sockem_ctrl tinycthread tinycthread_extra rdlist
OBJS := $(addprefix $(OUT)/,$(addsuffix .o,$(FRAMEWORK) $(TESTS_C) stubs))
# __FILE__ as upstream's build has it (tests name their topics after their file):
# the bare file name, not the path vpath found it by.
CFLAGS += -I$(SRC)/src -I$(T) -fmacro-prefix-map=$(T)/= -fmacro-prefix-map=$(SRC)/src/=

vpath %.c $(T) $(SRC)/src

$(OUT)/test-runner: $(OBJS) $(SRC)/src/librdkafka.a
	$(CC) -rdynamic -o $@ $(OBJS) $(SRC)/src/librdkafka.a $(LIBS)

$(OUT)/%.o: %.c $(RUNNER_MK) | $(OUT)
	$(CC) -MD -MP $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(OUT)/stubs.c: $(T)/test.c $(RUNNER_MK) | $(OUT)
	{ echo '#include "test.h"'; \
	  sed -n 's/^_TEST_DECL(\([0-9a-z_]*\));$$/\1/p' $< | grep -Ev '^($(BUILT))_' | \
	  sed 's/.*/int main_&(int argc, char **argv) { TEST_FAIL("& is not built in this runner"); return 1; }/'; \
	} > $@

$(OUT)/stubs.o: $(OUT)/stubs.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-unused-parameter -c $< -o $@

$(OUT):
	mkdir -p $@

-include $(OBJS:.o=.d)
