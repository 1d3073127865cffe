//! Real GPU warps making hostcalls against this crate's listener (feature `cuda`).
//!
//! ```sh
//! # here: build the host program (no CUDA needed to build it)
//! cargo build --release --features cuda --example cuda_waves
//! # where nvcc is: build the kernels (include/hostcall_cuda.cuh does the device side)
//! nvcc -arch=sm_90 -cubin -I include -o kernels.cubin std-adapter/examples/cuda/kernels.cu
//! # on the GPU machine
//! cuda_waves --module kernels.cubin            # checks: every reply verified, printf, FUNCTION_CALL
//! cuda_waves --module kernels.cubin --bench    # and the floor, latency variants, throughput table
//! cuda_waves --module kernels.cubin --gpus 2 --scaling   # one GPU against two, latency idle/loaded
//! cuda_waves --module kernels.cubin --puts --warps 1,1056 --threads 1,8   # LLVM libc's puts from every lane
//! ```
//!
//! Every visible GPU is served by this one process (`--gpus N`: the first N): each has its own
//! context, buffers in pinned memory allocated on its NUMA node, its own doorbell, and its own
//! group of listener threads on the CPUs near it ([`hostcall::DeviceListeners`]);
//! the checks run on every GPU. `--bench` measures GPU 0. `--scaling` runs 1,056 and 4,224 warps
//! per GPU on GPU 0 alone and on all GPUs at once, for each count of listener threads per GPU,
//! then one warp's latency on each GPU with the others idle and with them loaded.
//!
//! Each warp of 32 lanes is a wave of the phase protocol; buffers live in pinned, device-mapped
//! host memory ([`hostcall::backend::cuda::CudaMemory`]), their `occupied` bitmaps in device memory. The
//! lane service `mix` (id 100) answers `[hash of the 8 request words, word 0 + word 1]`; every
//! lane of every call checks its reply on the GPU, and the kernel counts errors and replies
//! checked (which must equal warps x 32 x calls). Output lines start with `cuda:`; the last line
//! is a `summary:`. Exits 0 when every check passed, 1 on any error or missing reply, and
//! [`NO_GPU_EXIT`] (3) with a `cuda: no CUDA device` line on stderr where there is none (not a
//! pass: nothing was checked).
//!
//! `--bench` adds, in the same run: the ping-pong floor (one GPU thread and one host thread
//! bouncing one word each way through pinned memory), one warp's round trip for each device-side
//! variant with a per-step breakdown (clock64 deltas of the leader lane), and the throughput at
//! 1, 32, 1,056 and 4,224 warps served by 1, 2 and 4 listener threads (a [`ListenerPool`]
//! splitting each buffer's packets into stripes).

use hostcall::{backend::cuda, Error};
use hostcall_core::SLOT_WORDS;
use std::process::ExitCode;

const MIX: u32 = 100;

/// The exit status where no CUDA device (or driver) is found: distinct from 0 (nothing was
/// checked), 1 (a check failed) and 2 (a bad command line).
const NO_GPU_EXIT: u8 = 3;

/// The host half of the lane service; `kernels.cu` computes the same (`mix`).
fn mix(r: &[u64; SLOT_WORDS]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64;
    for &w in r {
        h = (h ^ w).wrapping_mul(0x0000_0100_0000_01B3);
    }
    h ^ (h >> 29)
}

/// The host function of the FUNCTION_CALL check: `{in[0] + in[1], in[0] * in[2]}`.
extern "C" fn add_mul(out: *mut [u64; 2], input: *const [u64; 7]) {
    // SAFETY: the FUNCTION_CALL service passes valid pointers to its own arrays.
    let (out, input) = unsafe { (&mut *out, &*input) };
    *out = [input[0].wrapping_add(input[1]), input[0].wrapping_mul(input[2])];
}

mod bench;
mod check;
#[path = "../cli/mod.rs"]
mod cli;
mod gpu;
mod options;
mod puts;
mod scaling;
mod variants;

use check::run;
use gpu::Gpu;
use options::{parse, USAGE};

fn main() -> ExitCode {
    let options = cli::run_or_exit(parse(std::env::args_os().skip(1)), USAGE);
    let gpus = match open(&options) {
        Ok(gpus) => gpus,
        Err(Error::Cuda(why)) if cuda::probe().is_err() => {
            eprintln!("cuda: no CUDA device ({why}); nothing checked, exit {NO_GPU_EXIT}");
            return ExitCode::from(NO_GPU_EXIT);
        }
        Err(e) => {
            eprintln!("cuda: setup failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&gpus, &options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cuda: failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Every GPU asked for, each with its module, sharing one registry.
fn open(options: &options::Options) -> Result<Vec<Gpu>, Error> {
    let (services, printed) = gpu::services()?;
    cuda::open_gpus(options.gpus)?
        .into_iter()
        .map(|host| Gpu::new(host, &options.module, services.clone(), printed.clone()))
        .collect()
}
