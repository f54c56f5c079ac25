# Spack recipe for dsperf. It fetches nothing: copy packaging/spack/dsperf into a Spack repository's
# packages/ folder, then build from a checkout of the source with
#   cd dsperf && spack dev-build dsperf@0.2.0 +mpi +gloo ~cuda     (or +cuda +nccl cuda_arch=90)
#
# Kept minimal on purpose: Spack is neither on PyPI nor in Debian, so this recipe has not been run
# through `spack install` or `spack style` here. What it encodes is what CMakeLists.txt and
# cmake/Dependencies.cmake require; check it on a Spack site before relying on it.
from spack.package import *


class Dsperf(CMakePackage, CudaPackage):
    """Benchmarks and pre-flight checks for distributed training: dsdiag (pre-flight checks), dsbench
    (collective sweeps with nccl-tests' flags, DDP training steps), dsreport (HTML reports, comparisons,
    history) and dsrun (a torchrun-compatible launcher)."""

    version("0.2.0")

    variant("nccl", default=True, description="Build the NCCL backend (needs +cuda)")
    variant("mpi", default=True, description="Build the MPI backend and MPI checks")
    variant("gloo", default=True, description="Build the Gloo backend")
    conflicts("+nccl", when="~cuda", msg="the NCCL backend needs CUDA")

    depends_on("cmake@3.25:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("help2man", type="build")
    depends_on("fmt")
    depends_on("cli11")
    depends_on("nlohmann-json@3.11:")
    depends_on("googletest", type=("build", "link"))  # configure requires GTest (the test suite)
    depends_on("benchmark", type=("build", "link"))  # and Google Benchmark (micro-benchmarks)
    depends_on("hwloc")
    depends_on("re2")
    depends_on("sqlite")
    depends_on("blas")
    depends_on("mpi", when="+mpi")
    depends_on("gloo", when="+gloo")
    depends_on("nccl", when="+nccl")
    # HTML reports embed Chart.js (v3 or v4, UMD build) at build time; Spack has no package of it, so
    # point DS_CHARTJS at a chart.min.js (Debian: libjs-chart.js) through the environment.

    def cmake_args(self):
        def on_off(flag):
            return "ON" if self.spec.satisfies(flag) else "OFF"

        args = [
            self.define("DS_WITH_CUDA", on_off("+cuda")),
            self.define("DS_WITH_NCCL", on_off("+nccl")),
            self.define("DS_WITH_MPI", on_off("+mpi")),
            self.define("DS_WITH_GLOO", on_off("+gloo")),
            self.define("DS_GIT_COMMIT", "spack-" + str(self.spec.version)),
        ]
        if self.spec.satisfies("+cuda"):
            archs = self.spec.variants["cuda_arch"].value
            if archs and archs[0] != "none":
                args.append(self.define("CMAKE_CUDA_ARCHITECTURES", ";".join(archs)))
        chartjs = env.get("DS_CHARTJS")
        if chartjs:
            args.append(self.define("DS_CHARTJS", chartjs))
        return args
