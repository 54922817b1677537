#include "topology/catalog.h"
#include <gtest/gtest.h>
TEST(CatalogSmoke, Builds) { EXPECT_EQ(topo::find_gpu("h100-sxm").sm_count, 132u); }
