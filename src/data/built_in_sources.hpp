#pragma once
// The built-in data sources, each written by its reader's file and listed in data.source's order
// by source.cpp's registry (a static library drops none: nothing registers itself at start-up).
#include "fluence/data/data_source.hpp"

namespace fluence::built_in_sources {

DataSourceSpec synthetic();  // source.cpp
DataSourceSpec csv();        // loaders.cpp
DataSourceSpec arff();       // loaders.cpp
DataSourceSpec idx();        // loaders.cpp
DataSourceSpec hdf5();       // hdf5_source.cpp
DataSourceSpec tff();        // hdf5_source.cpp
DataSourceSpec leaf();       // leaf_source.cpp
DataSourceSpec npy();        // npy_source.cpp

}  // namespace fluence::built_in_sources
