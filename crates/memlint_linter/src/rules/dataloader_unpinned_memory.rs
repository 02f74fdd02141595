use memlint_semantic::facts::datasets::Samples;
use memlint_semantic::ir::Module;

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags a `torch.utils.data.DataLoader(...)` with worker processes
    /// (`num_workers` not 0) but without `pin_memory=True`, whose batches a
    /// loop of the program moves to an accelerator (`x.to(device)`,
    /// `x.cuda()`) in a training loop over the loader's own name in the
    /// same file: only there does the rule see what else the step waits
    /// for.
    ///
    /// ## Why is this bad?
    /// A host-to-device copy from ordinary (pageable) memory is staged
    /// through a pinned buffer by the driver, and CUDA first waits for
    /// every kernel already queued on the stream: each step's copy makes
    /// the host wait for the device, as a host sync does, and
    /// `non_blocking=True` has no effect. With `pin_memory=True` the
    /// loader's pin thread puts each batch in page-locked memory, the copy
    /// runs at full bandwidth and, with `non_blocking=True`, is queued
    /// without waiting, so the host keeps running ahead of the device.
    /// (A copy without `non_blocking=True` waits too, pinned or not:
    /// PyTorch synchronises the stream after it; both changes are needed.)
    /// Where the step also reads a value back every step (a per-step
    /// `loss.item()`), copies a tensor it built on the host every step
    /// (`Variable(torch.ones(b)).cuda()`, `Tensor(np.random.randint(...))`
    /// with `Tensor = torch.cuda.FloatTensor`) or calls a project helper
    /// that waits for the device on each call, the host waits there anyway
    /// and the copy would overlap nothing: those loaders are not reported. (The effect needs
    /// a GPU to measure and has not been measured by memprobe yet.)
    ///
    /// ## Example
    /// ```python
    /// loader = DataLoader(dataset, batch_size=256, num_workers=8)
    /// for x, y in loader:
    ///     x, y = x.cuda(), y.cuda()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// loader = DataLoader(dataset, batch_size=256, num_workers=8, pin_memory=True)
    /// for x, y in loader:
    ///     x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    /// ```
    ///
    /// ## Known false positives
    /// Only loaders whose samples may be large are reported. A dataset
    /// built in view (in the call, or bound to the name passed, also
    /// through `Subset` or `random_split`) must show it: a torchvision
    /// dataset of photographs (`ImageFolder`, `CelebA`, `ImageNet`), or a
    /// transform that resizes or crops to 64 pixels or more. A torchvision
    /// dataset of small images (MNIST, Fashion-MNIST, CIFAR-10/100, SVHN)
    /// not resized to 64 pixels (112 for the one-channel MNIST family: a
    /// third of a colour image's bytes; a size may be a name bound to a
    /// literal, `Resize(X_DIM)`), a transform whose last size is smaller
    /// (`Resize(32)`, `RandomCrop(28)`), and a dataset class built without
    /// a transform that sets a size (arrays in memory, token ids, a text,
    /// `Compose([ToTensor()])` alone) are not reported: a batch is a copy
    /// of a megabyte or two next to the step's kernels. A dataset made out
    /// of sight (a parameter, a helper's result) is judged by the rest:
    /// there small batches are reported. Moves outside training (one batch looked at
    /// before it, `for x, y in loader: ...; break`) do not decide whether
    /// the training step already waits. A `pin_memory` from a variable (`pin_memory=use_cuda`) or from a
    /// `**kwargs` dict the rule cannot read is not reported, nor a loader
    /// named for evaluation (`val_loader`, `test_loader`), nor a loader
    /// without workers: there the training process would pin each batch
    /// itself, and ML302 is the advice that comes first. Nor a loader whose
    /// batches the file moves only in training loops that read a value
    /// back to the host every step (`print(loss.item())` unguarded) or copy
    /// a host-built tensor to the device every step: the
    /// step waits twice, and neither the copy nor the read alone lets the
    /// host run ahead (ML305 is silent there too, since the blocking copy
    /// already waits; the pair is left unreported for want of a measured
    /// gain). A loader passed to a `train()` function elsewhere is not
    /// judged: the step that would wait is out of sight (a missed finding
    /// where it does not wait). A loader a helper of the file builds and
    /// returns is judged only when a loop of the file iterates the name the
    /// helper binds it to (`train_loader = DataLoader(...)` in
    /// `get_dataloaders(...)`, `for x, y in train_loader:` in the caller).
    /// Nor a loader of one sample per batch (`batch_size=1`, or a name
    /// bound to `1`): each copy is one image. Code written
    /// for PyTorch before 0.4 (`volatile=True` or `Variable(...)`, with
    /// `loss.data[0]`) is not
    /// checked. Pinned memory
    /// is a limited resource: with very large batches and many workers a
    /// maintainer may leave it off on purpose. Off by default.
    ///
    /// ## References
    /// - [torch.utils.data: memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    /// - [CUDA semantics: use pinned memory buffers](https://pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers)
    pub struct DataloaderUnpinnedMemory {
        code: "ML303",
        name: "dataloader-unpinned-memory",
        severity: Info,
        default: false,
        languages: [Python],
    }
}

impl Rule for DataloaderUnpinnedMemory {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_file(&self, module: &Module, checker: &mut Checker<'_>) {
        if !checker.in_torch_program() {
            return;
        }
        // Code for torch 0.3 (`volatile=True`, `loss.data[0]`) reads every
        // loss back each step and does not run on a current torch.
        if checker.written_for_volatile_torch() {
            return;
        }
        let sites = checker.loader_sites();
        for site in sites.iter() {
            // Without workers the main process would pin each batch itself,
            // one more copy in the step: ML302 comes first there.
            let workers = !site.num_workers.absent_or(0);
            if !workers || !site.pin_memory.absent_or(false) || !checker.loader_feeds_training(site) {
                continue;
            }
            // Where the step also reads a value back every step, the host
            // waits for the device there anyway: a copy that no longer
            // waits would overlap nothing.
            if checker.cx.pipeline().moves_only_in_synced_loops(site) {
                continue;
            }
            // MNIST or CIFAR batches, a table or token ids: a copy of a
            // megabyte or two, next to the step's kernels. A dataset built in
            // view must show large samples (photographs, a resize to 64
            // pixels or more); one made out of sight is judged by the rest.
            if checker.loader_samples(module, site) == Samples::Small {
                continue;
            }
            // One sample per batch (`batch_size=1`, a demo over a few
            // pictures): a copy of one image, with little to overlap.
            if site.one_sample {
                continue;
            }
            // Only a loop over the loader's own name in this file shows what
            // else the step waits for; a loader passed to a `train()` of
            // another cell or module is not judged (its step may read a
            // value back every step there).
            let pipeline = checker.cx.pipeline();
            if !site.bound_to.as_deref().is_some_and(|b| pipeline.iterates(b) && pipeline.moves_batches_of(site)) {
                continue;
            }
            drop(pipeline);
            let span = checker.keyword_span(module, site.span, "pin_memory").unwrap_or(site.span);
            checker.report(
                Self::META
                    .diagnostic(span, "`DataLoader` without `pin_memory=True` feeds the GPU from pageable memory: each batch's copy waits for the queued kernels")
                    .with_help("pass `pin_memory=True`, and move its batches with `.to(device, non_blocking=True)`"),
            );
        }
    }
}
