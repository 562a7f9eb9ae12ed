# The tests that run kernels (names "kernel: ...") on oclgrind's simulated device, with API and data-race checks.
# The oclgrind wrapper preloads its runtime, so its device is the only platform the tests see.
# The held-kernel case is left out: oclgrind spins on a blocking call while a command waits on a user event.
set -euo pipefail
log=build/ci/oclgrind.log
start=$(date +%s)
timeout 600 oclgrind --check-api --data-races build/ci/tests/clpool_tests -tc='kernel:*' -tce='*held kernel*' 2>&1 | tee "$log"
if grep -E "Oclgrind - |Invalid (read|write)|data race" "$log"; then
  echo "oclgrind reported errors (above)"; exit 1
fi
grep -Eq "test cases: +[1-9][0-9]* \| +[1-9]" "$log" || { echo "oclgrind ran no kernel test"; exit 1; }
echo "oclgrind: $(( $(date +%s) - start )) s"
