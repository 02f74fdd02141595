use memlint_semantic::facts::pipeline::Opt;
use memlint_semantic::ir::Module;

use crate::{declare_rule, Checker, Rule, RuleMeta};

declare_rule! {
    /// ## What it does
    /// Flags a `torch.utils.data.DataLoader(...)` with no worker
    /// processes (`num_workers` not passed, or `num_workers=0`) whose
    /// batches a training loop of the program moves to an accelerator
    /// (`x.to(device)`, `x.cuda()`, `x.type(torch.cuda.FloatTensor)`). When
    /// the loader is iterated in the same file (`for x, y in loader`, or
    /// `next(it)` of `it = iter(loader)`), a loop that runs `backward()`
    /// must move its batches (a loop over a name it is bound to, or over a
    /// parameter of that name: a loader is known by its construction or
    /// by a name like `train_loader`, `dl`, `iterator` or d2l's
    /// `train_iter`); a loader passed on counts when the file moves
    /// some loader's batches, or when it can reach another file that does
    /// (its module is imported there, or it is passed to a function of the
    /// project).
    ///
    /// ## Why is this bad?
    /// Without workers, reading, decoding and augmenting every sample and
    /// collating the batch happen in the training process, between steps:
    /// the GPU waits for each batch. With workers, batches are prepared in
    /// parallel while the GPU computes.
    ///
    /// ## Example
    /// ```python
    /// loader = DataLoader(ImageFolder(root, transform=augment), batch_size=64, shuffle=True)
    /// for x, y in loader:
    ///     x, y = x.to(device), y.to(device)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// loader = DataLoader(
    ///     ImageFolder(root, transform=augment), batch_size=64, shuffle=True,
    ///     num_workers=4, persistent_workers=True,
    /// )
    /// ```
    /// Start with about 4 workers per GPU (at most the CPU cores you have
    /// per GPU) and raise it while the step time falls.
    ///
    /// ## Known false positives
    /// A notebook rebinds its loader names from cell to cell: a loader
    /// bound at module level is judged by the module-level loops between
    /// its binding and the next `DataLoader(...)` bound to the same name (a
    /// first `train_loader` that only computes channel means on the CPU is
    /// not the one the training loop iterates), and a function that builds
    /// a loader of its own under the same name moves its own batches, not
    /// those of the module-level one.
    /// A loader whose batches go to a device the file binds to the CPU
    /// and to nothing else (`device = torch.device("cpu")`) feeds no
    /// accelerator and is not reported, nor is any loader of a program
    /// that never mentions CUDA and binds its device at module level to
    /// the CPU only (a notebook's device cell after the `def train(model,
    /// device, ...)` that receives it).
    /// A dataset already in memory as tensors (a tensor itself,
    /// `torch.from_numpy(x)`, `TensorDataset`, torchvision's MNIST, CIFAR,
    /// SVHN or USPS with no transform or one that only converts,
    /// `Compose([ToTensor(), Normalize(...)])`, also with a reshape
    /// (`Lambda(lambda x: x.view(-1))`, `lambda x: ToTensor()(x).view(-1)`)
    /// and when a function of the
    /// file returns it, `transform=get_transform()`: the images are held in
    /// memory and an item is a conversion; on a fast GPU a small model's
    /// step may still outrun that conversion, and two workers would help), a Python
    /// list of samples made ahead, `[(f, y) for f, y in zip(feats,
    /// labels)]` or `list(zip(inputs, labels))`, a range of indices
    /// (`for idx in DataLoader(range(n), b, shuffle=True):`, batches of
    /// indices into tensors held elsewhere), a
    /// dataset class of the file whose `__getitem__` only returns items of
    /// its attributes, maybe made tensors, sliced, cast (`chunk[:-1].long(),
    /// chunk[1:].long()`, a language model's input and target,
    /// `np.float32(self.train[i:i + w])`, or read from a slice bound
    /// first and converted, `rows = self.frame.iloc[i:i + n]` then
    /// `torch.FloatTensor(rows.values)`), maybe at an index computed from
    /// the index and in one arm per split (`if self.mode == "train":`), passed
    /// through a transform given at construction that only converts
    /// (`if self.transform: image = self.transform(image)` with
    /// `transform=Compose([ToTensor(), Normalize(...)])`, or none given; one
    /// that augments is per-sample work) or gathered in a dict, as
    /// tokenized text is served: `{k: torch.tensor(v[i]) for k, v in
    /// self.encodings.items()}`), or a Hugging Face dataset prepared ahead and
    /// formatted with `with_format`/`set_format`, also in place in another
    /// method, `self.dataset[split].set_format(...)`; also when a loader
    /// helper's `dataset` parameter gets one from every call in the file)
    /// needs no workers and is not reported (also its parts,
    /// `random_split(ds, [n, m])` or `Subset(ds, idx)`; also a class of another
    /// module of the run, with or without such a transform, one whose
    /// `__getitem__` binds the items to names first, or what a function of
    /// the file returns); neither is a
    /// loader named for evaluation, or held by a dict or list so named
    /// (`test_loaders = {res: DataLoader(...)}`), or built in a method named so
    /// (`val_loader`, `test_dataloader`, Lightning's `def
    /// val_dataloader(self)`: it runs once per epoch), one the file reads
    /// one batch of (`next(iter(loader))` outside a loop, a sample to
    /// plot; in a training loop it draws every step's batch; or a loader
    /// built inside `next(iter(DataLoader(...)))`, for one batch, or a
    /// loop over it that leaves at once, `for x, y in loader: break`: a
    /// peek that the training loop after it, or the helper the loader is
    /// passed to, does not hide), one only an
    /// inference or feature-extraction loop iterates, nor one whose
    /// `num_workers` comes from a variable or a `**kwargs` dict the rule
    /// cannot read, nor one whose batch is the whole dataset
    /// (`batch_size=len(dataset)`: one batch per epoch, nothing for workers
    /// to split), nor one returned by a helper function that nothing in
    /// the run calls (a method may be called by a framework and still
    /// counts), nor one a dataset builds for itself in a method (a loader
    /// per class drawn from in its `__getitem__`: it runs inside the
    /// workers of the loader over that dataset), nor code written for
    /// PyTorch before 0.4 (`volatile=True`
    /// or `Variable(...)` with `loss.data[0]`,
    /// `backward(retain_variables=True)`), which a
    /// current PyTorch cannot run. Other in-memory datasets (one that converts each item,
    /// `torch.flip(self.data[i])`) are reported though workers would
    /// only add overhead there, and code that must stay single-process
    /// (some Windows or notebook setups) is reported too. Off by default.
    ///
    /// ## References
    /// - [torch.utils.data: single- and multi-process data loading](https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading)
    /// - [Performance tuning guide: enable async data loading](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-async-data-loading-and-augmentation)
    pub struct DataloaderSingleProcess {
        code: "ML302",
        name: "dataloader-single-process",
        severity: Info,
        default: false,
        languages: [Python],
    }
}

impl Rule for DataloaderSingleProcess {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_file(&self, module: &Module, checker: &mut Checker<'_>) {
        // Code for torch 0.3 (`volatile=True` with `loss.data[0]`,
        // `backward(retain_variables=True)`) does not run on a current torch.
        if !checker.in_torch_program() || checker.written_for_volatile_torch() {
            return;
        }
        let sites = checker.loader_sites();
        // A loader a dataset builds for itself (one per class, drawn from
        // in its `__getitem__`): it runs inside the workers of the loader
        // over that dataset, where a process of its own would be one too many.
        let index = checker.cx.index();
        let in_a_dataset = |f: &str| f.rsplit_once('.').is_some_and(|(class, _)| index.method_of(class, "__getitem__").is_some());
        for site in sites.iter() {
            if site.in_memory
                || site.whole_dataset
                || !site.num_workers.absent_or(0)
                || site.function.as_deref().is_some_and(in_a_dataset)
                || !checker.loader_feeds_training(site)
            {
                continue;
            }
            let (span, what) = match site.num_workers {
                Opt::Literal(_) => (checker.keyword_span(module, site.span, "num_workers").unwrap_or(site.span), "`num_workers=0`"),
                _ => (site.span, "no `num_workers`"),
            };
            let help = if site.redrawn {
                "pass `num_workers=4` (about 4 per GPU, at most the CPU cores per GPU) and `pin_memory=True`, and draw from one iterator (`it = iter(loader)` before the loop, `next(it)` in it): `next(iter(loader))` would start the workers again at every step"
            } else {
                "pass `num_workers=4` (about 4 per GPU, at most the CPU cores per GPU), `persistent_workers=True` and `pin_memory=True`, then tune by the step time"
            };
            checker.report(
                Self::META
                    .diagnostic(span, format!("`DataLoader` with {what} loads every batch in the training process while the GPU waits"))
                    .with_help(help),
            );
        }
    }
}
