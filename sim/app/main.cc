// sim/app/main.cc: the clustersim command (being assembled in this session).
#include <cstdio>
int main() {
  std::fprintf(stderr, "clustersim: not assembled yet\n");
  return 1;
}
