"""The cards a plan can be made for: each card's spec sheet (with its source), and its class's efficiencies.

A card is what its maker publishes: dense peak FLOP/s per number format (no sparsity), memory bandwidth and
capacity, and the link between cards for tensor parallelism. What software reaches of those peaks is not on any
spec sheet: it belongs to the card's class (datacenter GPU, consumer GPU, Apple GPU, CPU), each with

  mamf       the share of the spec sheet's matmul peak a bare matmul reaches (where the card has no measurement),
  mfu        the share of that achievable matmul rate a prefill reaches (long prompts),
  mbu        the share of peak bandwidth a decode step reaches streaming weights and KV cache,
  layer_s    host and launch time per layer per forward pass (kernel launches, Python, scheduling),
  pass_s     a fixed time per forward pass (sampling, the step's bookkeeping),
  allreduce  the latency of one all-reduce between cards (tensor parallelism), growing with log2(cards),

each with a range and where it comes from. The values are fitted on published measurements (the calibration split
of assets/published/gpu_measurements.csv, by benchmarks/calibrate_card_model.py) and checked against the rest
(tests/engine/perfmodel/test_published.py, docs/performance-model.md). This machine is a card too: its peaks are
measured by engine/labs/hardware.py when asked (`measured_card`), never taken from a file.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.errors import EngineError

GB = 1e9
TFLOP = 1e12


@dataclass(frozen=True)
class Param:
    """One efficiency or overhead: the value used, the range published measurements span, and where it comes from."""
    value: float
    low: float
    high: float
    source: str


@dataclass(frozen=True)
class DeviceClass:
    key: str
    name: str
    mamf: Param  # the share of the spec sheet's matmul peak a matmul alone reaches, where no card measured its own
    mfu: Param
    mbu: Param
    layer_s: Param
    pass_s: Param
    allreduce_s: Param  # one all-reduce between 2 cards
    allreduce_doubling_s: Param  # added per doubling of the cards beyond 2
    usable_memory: Param  # the share of a card's memory weights and KV cache may take

    def params(self) -> dict[str, Param]:
        return {"mamf": self.mamf, "mfu": self.mfu, "mbu": self.mbu, "layer_s": self.layer_s, "pass_s": self.pass_s,
                "allreduce_s": self.allreduce_s, "allreduce_doubling_s": self.allreduce_doubling_s,
                "usable_memory": self.usable_memory}


# How compute and memory traffic overlap inside one pass: time = (compute^p + memory^p)^(1/p). p = infinity is the
# ideal roofline (the slower of the two hides the other), p = 1 no overlap at all. Near the ridge real kernels sit
# between: small-M matrix multiplications neither stream at full bandwidth nor keep the tensor cores busy.
OVERLAP = Param(1.06, 1.0, 6.0, "fitted on the calibration rows: close to 1, i.e. in the published passes the two costs add "
                "up more than they hide each other (short prompts near the ridge; decode steps at batch 16)")

MAMF = ("'Maximum Achievable Matmul FLOPS', measured by a brute-force shape search (github.com/stas00/ml-engineering, "
        "compute/accelerator/README.md): A100 SXM 86.9 %, H100 SXM 80.3 % in bf16, 70.9 % in fp8, H200 73.4 % in fp8")
VLLM_MEMORY = Param(0.9, 0.8, 0.95, "vLLM's default gpu_memory_utilization (0.9): the rest holds activations and the CUDA "
                    "context")
FIT = ("fitted on the calibration rows (TensorRT-LLM v0.9 on A100 and H100 in fp16 and fp8, gpt-fast on A100; "
       "docs/performance-model.md)")
CLASSES: dict[str, DeviceClass] = {c.key: c for c in [
    DeviceClass(
        "datacenter-gpu", "datacenter GPU (A100, H100, H200, L4, L40S)",
        mamf=Param(0.80, 0.71, 0.87, "estimate for cards without their own measurement, in the range of " + MAMF),
        mfu=Param(0.77, 0.5, 0.9, FIT + ", of the achievable matmul rate (mamf); against the spec sheet, the "
                  "calibration rows' 2,048-token prefills reach ~65-75 % on A100 in fp16, ~45-55 % on H100"),
        mbu=Param(0.77, 0.55, 0.85, FIT + "; gpt-fast's Llama-2-7B batch 1 on an A100: 1,397 GB/s = 69 % of 2,039; "
                  "Databricks measured 55-60 % at batch 1 (blog 'LLM Inference Performance Engineering: Best Practices', "
                  "2023)"),
        layer_s=Param(33e-6, 5e-6, 60e-6, FIT + "; hidden behind the device's work unless the pass is shorter "
                      "(a small model: a launch-bound step)"),
        pass_s=Param(1.5e-3, 0.0, 2.0e-3, FIT + "; TensorRT-LLM v0.9's batch-1 steps leave ~1.4 ms beside the bytes "
                     "(A100 and H100 alike); gpt-fast's CUDA graphs leave less"),
        allreduce_s=Param(13e-6, 5e-6, 30e-6, FIT + "; gpt-fast's TP=2/4/8 steps imply 17-30 µs per all-reduce"),
        allreduce_doubling_s=Param(11e-6, 0.0, 30e-6, FIT),
        usable_memory=VLLM_MEMORY),
    DeviceClass(
        "consumer-gpu", "consumer GPU (GeForce)",
        mamf=Param(0.80, 0.71, 0.87, "estimate: no published measurement; the datacenter cards' range (" + MAMF + ")"),
        mfu=Param(0.70, 0.30, 0.95, "fitted on llama.cpp's RTX 4090 Llama-3-8B F16 pp512 (XiongjieDai/GPU-Benchmarks-"
                  "on-LLM-Inference), of the achievable matmul rate at the fp16-accumulate peak llama.cpp's cuBLAS "
                  "path uses"),
        mbu=Param(0.95, 0.65, 0.95, "fitted on the same page's RTX 4090 F16 tg512 (GDDR6X streams close to its peak)"),
        layer_s=Param(10e-6, 5e-6, 60e-6, "estimate: llama.cpp replays each token's kernels from CUDA graphs; the class "
                      "has too few published rows to fit it apart from the bandwidth"),
        pass_s=Param(0.3e-3, 0.0, 1.0e-3, "estimate, as the datacenter class"),
        allreduce_s=Param(30e-6, 10e-6, 100e-6, "estimate: PCIe between GeForce cards (no NVLink)"),
        allreduce_doubling_s=Param(10e-6, 0.0, 30e-6, "estimate"),
        usable_memory=VLLM_MEMORY),
    DeviceClass(
        "apple-gpu", "Apple GPU (M-series, unified memory)",
        mamf=Param(0.80, 0.70, 0.90, "a published MPS fp32 matmul on an M3 Max reaches 11.4 of ~14.2 estimated TFLOP/s "
                   "(github.com/chsasank/device-benchmarks pull 7)"),
        mfu=Param(0.95, 0.35, 0.95, "fitted on llama.cpp's M3 Max Llama-3-8B F16 pp512 (XiongjieDai/GPU-Benchmarks-"
                  "on-LLM-Inference) against a peak that is itself an estimate (see the card); a published MPS matmul "
                  "reaches 80 % of it"),
        mbu=Param(0.92, 0.55, 0.95, "fitted on the same page's M3 Max F16 tg512"),
        layer_s=Param(10e-6, 5e-6, 100e-6, "estimate: llama.cpp encodes a token's kernels into a few Metal command "
                      "buffers; too few rows to fit it apart from the bandwidth"),
        pass_s=Param(0.3e-3, 0.0, 2.0e-3, "estimate"),
        allreduce_s=Param(0.0, 0.0, 0.0, "one chip: no tensor parallelism"),
        allreduce_doubling_s=Param(0.0, 0.0, 0.0, "one chip"),
        usable_memory=Param(0.75, 0.65, 0.78, "Metal's recommendedMaxWorkingSetSize: ~70-78 % of unified memory "
                            "(Apple tech talk 10580, quoted by XiongjieDai/GPU-Benchmarks-on-LLM-Inference)")),
    DeviceClass(
        "cpu", "CPU",
        mamf=Param(1.0, 1.0, 1.0, "this machine's peak is itself a measured matmul (engine/labs/hardware.py); the laptop "
                   "preset's is an estimate"),
        mfu=Param(0.7, 0.4, 1.0, "estimate, of this machine's measured matmul peak (a matmul at the model's own "
                  "shapes): a prefill adds attention, norms and activations between the matmuls"),
        mbu=Param(0.7, 0.4, 1.0, "estimate, of this machine's measured read bandwidth: this project's bench brings a "
                  "decode step to 1.0-1.5x the time of reading its bytes (docs/performance.md, 'the floor')"),
        layer_s=Param(60e-6, 10e-6, 200e-6, "estimate: this project measured ~10 µs per oneDNN matmul call, 7 per "
                      "layer (docs/decisions/compiled-decode-layer.md)"),
        pass_s=Param(1e-3, 0.0, 5e-3, "estimate: sampling and the Python loop"),
        allreduce_s=Param(0.0, 0.0, 0.0, "one socket: no tensor parallelism"),
        allreduce_doubling_s=Param(0.0, 0.0, 0.0, "one socket"),
        usable_memory=Param(0.8, 0.5, 0.9, "estimate: the operating system and other programs keep the rest")),
]}


@dataclass(frozen=True)
class Card:
    key: str  # what `--gpu` takes
    name: str
    device_class: str  # a key of CLASSES
    flops: dict  # number format ("fp32", "fp16", "fp8") -> dense peak FLOP/s
    bytes_per_s: float  # memory bandwidth
    memory_bytes: float  # memory one card holds
    link_bytes_per_s: float  # to another card, each way (NVLink or PCIe): tensor parallelism's all-reduces
    source: str  # where the numbers come from
    note: str = ""  # e.g. which numbers are estimates, not spec sheet
    achievable: dict = field(default_factory=dict)  # number format -> a measured matmul FLOP/s (MAMF), where published
    measured_at: str | None = None  # when this machine's peaks were measured (None: a spec sheet)
    efficiency: dict = field(default_factory=dict)  # overrides of the class's values, measured here (name -> Param)
    origin: str = "spec sheet"  # what its peaks are, in a table's "from" column (a measured card says when instead)

    @property
    def klass(self) -> DeviceClass:
        return CLASSES[self.device_class]

    def param(self, name: str) -> Param:
        return self.efficiency.get(name) or getattr(self.klass, name)

    def peak(self, fmt: str) -> float:
        if fmt not in self.flops:
            raise EngineError(f"{self.name} has no {fmt} matrix units on its spec sheet; its formats: "
                              f"{', '.join(self.flops)}")
        return self.flops[fmt]

    def matmul(self, fmt: str) -> float:
        """The matmul rate reachable at all: a published measurement of this card, else the spec x the class's share."""
        return self.achievable.get(fmt) or self.peak(fmt) * self.param("mamf").value

    def ridge(self, fmt: str = "fp16") -> float:
        """FLOP per byte where the spec sheet's roofline turns from bandwidth to compute."""
        return self.peak(fmt) / self.bytes_per_s


# A link as an all-reduce sees it (NCCL's "bus bandwidth"): NVLink reaches its one-way figure (8 H200s: 475 GB/s,
# github.com/NVIDIA/nccl-tests issue 272); PCIe is held to what the CPU and memory between the cards deliver (8 cards on
# PCIe 5.0: 28-35 GB/s, github.com/NVIDIA/nccl issue 1639), so PCIe 4.0 at half that.
NVLINK3, NVLINK4, PCIE4 = 300 * GB, 450 * GB, 16 * GB
DENSE = "dense tensor-core peaks (the datasheet's sparsity figures halved)"
CARDS: dict[str, Card] = {c.key: c for c in [
    Card("a100-80gb", "NVIDIA A100 80GB SXM", "datacenter-gpu",
         {"fp32": 19.5 * TFLOP, "fp16": 312 * TFLOP}, 2039 * GB, 80 * GB, NVLINK3,
         "NVIDIA A100 datasheet: 312 TFLOP/s bf16/fp16, 19.5 fp32, 2,039 GB/s, NVLink 600 GB/s; a bf16 matmul reaches "
         "271.2 (" + MAMF + ")", achievable={"fp16": 271.2 * TFLOP}),
    Card("h100-sxm", "NVIDIA H100 SXM", "datacenter-gpu",
         {"fp32": 67 * TFLOP, "fp16": 989.5 * TFLOP, "fp8": 1979 * TFLOP}, 3350 * GB, 80 * GB, NVLINK4,
         f"NVIDIA H100 datasheet ({DENSE}): 989.5 TFLOP/s bf16, 1,979 fp8, 67 fp32, 3.35 TB/s, NVLink 900 GB/s; a "
         "matmul reaches 794.5 in bf16, 1,402.6 in fp8 (" + MAMF + ")",
         achievable={"fp16": 794.5 * TFLOP, "fp8": 1402.6 * TFLOP}),
    Card("h200", "NVIDIA H200 SXM", "datacenter-gpu",
         {"fp32": 67 * TFLOP, "fp16": 989.5 * TFLOP, "fp8": 1979 * TFLOP}, 4800 * GB, 141 * GB, NVLINK4,
         "NVIDIA H200 datasheet: the H100's compute with 4.8 TB/s HBM3e (1.43x) and 141 GB; a matmul reaches 794.5 in "
         "bf16 ('H200 is the same'), 1,453.4 in fp8 (" + MAMF + ")",
         achievable={"fp16": 794.5 * TFLOP, "fp8": 1453.4 * TFLOP}),
    Card("l4", "NVIDIA L4", "datacenter-gpu",
         {"fp32": 30.3 * TFLOP, "fp16": 121 * TFLOP, "fp8": 242.5 * TFLOP}, 300 * GB, 24 * GB, PCIE4,
         f"NVIDIA L4 datasheet ({DENSE}): 121 TFLOP/s fp16, 242.5 fp8, 30.3 fp32, 300 GB/s, PCIe 4.0"),
    Card("l40s", "NVIDIA L40S", "datacenter-gpu",
         {"fp32": 91.6 * TFLOP, "fp16": 362 * TFLOP, "fp8": 733 * TFLOP}, 864 * GB, 48 * GB, PCIE4,
         f"NVIDIA L40S datasheet ({DENSE}): 362 TFLOP/s bf16, 733 fp8, 91.6 fp32, 864 GB/s, PCIe 4.0"),
    Card("rtx-4090", "NVIDIA RTX 4090", "consumer-gpu",
         {"fp32": 82.6 * TFLOP, "fp16": 330.3 * TFLOP}, 1008 * GB, 24 * GB, PCIE4,
         "NVIDIA Ada Lovelace architecture whitepaper: 330.3 TFLOP/s fp16 tensor with fp16 accumulate (165.2 with "
         "fp32 accumulate), 82.6 fp32, 1,008 GB/s GDDR6X, PCIe 4.0",
         "fp16 here is the fp16-accumulate rate llama.cpp's matmuls use; PyTorch's default (fp32 accumulate) halves it"),
    Card("m3-max", "Apple M3 Max (40-core GPU)", "apple-gpu",
         {"fp32": 14.2 * TFLOP, "fp16": 14.2 * TFLOP}, 400 * GB, 128 * GB, 0.0,
         "Apple's spec page: 400 GB/s unified memory, up to 128 GB. FLOP/s: an estimate, not a spec sheet "
         "(40 cores x 128 ALUs x 2 FLOP x ~1.4 GHz); a published MPS fp32 matmul measurement reaches 11.4 TFLOP/s "
         "(github.com/chsasank/device-benchmarks pull 7)",
         "the TFLOP/s is a third-party estimate (Apple publishes none); fp16 runs at the fp32 rate",
         achievable={"fp32": 11.4 * TFLOP, "fp16": 11.4 * TFLOP},
         origin="spec sheet (bandwidth); TFLOP/s an estimate"),
    Card("laptop-cpu", "Laptop CPU (8 cores, DDR5-5600)", "cpu",
         {"fp32": 0.9 * TFLOP, "fp16": 0.9 * TFLOP}, 89.6 * GB, 32 * GB, 0.0,
         "typical, an estimate: 8 cores x 3.5 GHz x 32 fp32 FLOP/cycle (AVX2 FMA); dual-channel DDR5-5600 = 89.6 GB/s",
         "not a spec sheet: a typical machine", origin="estimate: a typical laptop"),
]}
THIS_MACHINE = "this-cpu"


def card(key: str) -> Card:
    """The card by its key (case-insensitive) or display name; one clear line listing the keys otherwise."""
    found = CARDS.get(key.lower()) or next((c for c in CARDS.values() if c.name == key), None)
    if found is None:
        raise EngineError(f"unknown card '{key}'; valid: {', '.join([*CARDS, THIS_MACHINE])}")
    return found


def measured_card(matmul_flops_per_s: float, read_bytes_per_s: float, memory_bytes: float, when: str,
                  device: str = "cpu", mfu: Param | None = None, mbu: Param | None = None) -> Card:
    """This machine as a card: peaks measured here (engine/labs/hardware.py) at `when`, the CPU class's efficiencies
    unless the dashboard measured this machine's own (a prefill's MFU, a decode step's MBU). A measured MBU is a whole
    step's bytes over its time: the step's overheads are inside it, so they are not added again."""
    if not (matmul_flops_per_s > 0 and read_bytes_per_s > 0):
        raise EngineError("this machine's measured peaks must be > 0 (FLOP/s and bytes/s)")
    overrides = {k: v for k, v in (("mfu", mfu), ("mbu", mbu)) if v is not None}
    if mbu is not None:
        inside = Param(0.0, 0.0, 0.0, "inside the measured MBU (a whole decode step's time)")
        overrides.update(layer_s=inside, pass_s=inside)
    return Card(THIS_MACHINE, f"this machine ({device})", "cpu",
                {"fp32": matmul_flops_per_s, "fp16": matmul_flops_per_s}, read_bytes_per_s, memory_bytes, 0.0,
                f"measured here {when}: a matmul at the model's shapes {matmul_flops_per_s / 1e9:.0f} GFLOP/s, a "
                f"streaming read {read_bytes_per_s / 1e9:.1f} GB/s (engine/labs/hardware.py)",
                "peaks measured on this machine; bf16 counted at the fp32 rate", measured_at=when, efficiency=overrides)


def with_class_values(c: Card, **values: float) -> Card:
    """A copy of `c` whose class values are replaced (the calibration script's trial points; tests)."""
    eff = dict(c.efficiency)
    for name, v in values.items():
        base = c.param(name)
        eff[name] = replace(base, value=v)
    return replace(c, efficiency=eff)
