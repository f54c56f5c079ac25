// ctest lsan.own_leak_caught: a leak in our own code is still reported under scripts/sanitizers'
// suppressions (lsan.supp suppresses third-party libraries only). This program leaks 4096 bytes from
// a function of its own and exits 0; LeakSanitizer must turn that into a failure naming the function.
//
// The leak happens on a thread that has ended before the check: LeakSanitizer scans the stacks and
// registers of live threads conservatively, and clang at -O1 left the pointer in a stack slot of
// main, where it still counted as reachable.
#include <cstdio>
#include <cstring>
#include <thread>

__attribute__((noinline)) void* dsOwnLeakForTheLsanTest() {
  void* p = ::operator new(4096);
  std::memset(p, 1, 4096);
  return p;
}

int main() {
  std::thread([] {
    [[maybe_unused]] static volatile void* sink;  // written, never read: the store is what counts
    sink = dsOwnLeakForTheLsanTest();
    sink = nullptr;  // now unreachable: a leak
  }).join();
  std::puts("leaked 4096 bytes on purpose");
  return 0;
}
