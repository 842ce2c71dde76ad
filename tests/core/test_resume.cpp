// Checkpoint state as named fields (core/resume.hpp): a record's scalars packed in the order of
// its table and read back exactly, integers included; a stored array of another size or a
// missing one refused; vectors stored under their names.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fluence/core/error.hpp"
#include "fluence/core/resume.hpp"

namespace fluence {
namespace {

struct Record {
  double loss = 0.0;
  std::int64_t iterations = 0;
  int steps = 0;
  long count = 0;
  std::vector<double> theta, curve;
};

const ScalarFields<Record> kScalars = {{"loss", &Record::loss},
                                       {"iterations", &Record::iterations},
                                       {"steps", &Record::steps},
                                       {"count", &Record::count}};
const VectorFields<Record> kVectors = {{"theta", &Record::theta}, {"curve", &Record::curve}};

Record example() {
  Record r;
  r.loss = 0.1 + 0.2;                          // not a round number: it must come back bit for bit
  r.iterations = (std::int64_t{1} << 53) - 1;  // the largest integer a double holds exactly
  r.steps = -7;
  r.count = 123456789;
  r.theta = {1.5, -2.25};
  r.curve = {};
  return r;
}

TEST(ScalarFields, PacksInTableOrderAndReadsBackExactly) {
  const Record r = example();
  const std::vector<double> packed = kScalars.pack(r);
  // The table's order is the file format: these positions are what older checkpoints hold.
  EXPECT_EQ(packed, (std::vector<double>{0.1 + 0.2, 9007199254740991.0, -7.0, 123456789.0}));
  StateArrays state{{"case/numbers", packed}};
  Record back;
  kScalars.read(state, "case/numbers", back);
  EXPECT_EQ(back.loss, r.loss);
  EXPECT_EQ(back.iterations, r.iterations);
  EXPECT_EQ(back.steps, r.steps);
  EXPECT_EQ(back.count, r.count);
}

TEST(ScalarFields, RefusesAnArrayOfAnotherSizeOrAMissingOne) {
  StateArrays state{{"numbers", {1.0, 2.0, 3.0}}};
  Record r;
  try {
    kScalars.read(state, "numbers", r);
    FAIL() << "a 3-value array was read into 4 fields";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint: dataset \"numbers\" has 3 values, this run needs 4");
  }
  EXPECT_THROW(kScalars.read(state, "other", r), InputError);
}

TEST(VectorFields, StoresEachVectorUnderItsName) {
  const Record r = example();
  StateArrays state;
  kVectors.write(r, "fldp/case_000002/", state);
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state.at("fldp/case_000002/theta"), r.theta);
  EXPECT_TRUE(state.at("fldp/case_000002/curve").empty());
  Record back;
  back.curve = {9.0};
  kVectors.read(state, "fldp/case_000002/", back);
  EXPECT_EQ(back.theta, r.theta);
  EXPECT_TRUE(back.curve.empty());
  EXPECT_THROW(kVectors.read(state, "fldp/case_000003/", back), InputError);
}

}  // namespace
}  // namespace fluence
