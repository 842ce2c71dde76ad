#pragma once
// While reading files the user gave (a checkpoint, --model), HDF5's own error printing is off: a
// failure is reported by the reader's one message, not HDF5's error stack.
#include <hdf5.h>

namespace fluence {

class SilentHdf5 {
 public:
  SilentHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &function_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~SilentHdf5() { H5Eset_auto2(H5E_DEFAULT, function_, data_); }
  SilentHdf5(const SilentHdf5&) = delete;
  SilentHdf5& operator=(const SilentHdf5&) = delete;

 private:
  H5E_auto2_t function_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace fluence
