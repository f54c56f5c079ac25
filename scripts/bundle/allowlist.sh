# The libraries a GPU node provides, so the bundle does not carry them (sourced by scripts/bundle.sh
# and its test): glibc's, the C++ runtime, the driver's libcuda and libnvidia-ml, and NCCL and cuBLAS
# (hundreds of MiB, tied to the driver; the launcher finds them at run time, share/dsperf/find-libs.sh).
# Extended regular expressions on the file name (soname).
ds_allowed_re='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libnvidia-ml\.so|libnccl\.so|libcublas\.so|libcublasLt\.so)'
# Of those, the ones find-libs.sh must locate (the rest is always there on a node with a driver).
ds_runtime_re='^(libnccl\.so|libcublas\.so|libcublasLt\.so)'
