//! PyTorch's mixed-precision API: the `torch.cuda.amp` and `torch.cpu.amp`
//! names deprecated since PyTorch 2.4, and what replaces each in
//! `torch.amp`.

/// The deprecated modules.
pub const DEPRECATED_MODULES: &[&str] = &["torch.cuda.amp", "torch.cpu.amp"];

/// The module that replaces them.
pub const MODULE: &str = "torch.amp";

/// The root module whose import alias a replacement is written with.
pub const TORCH: &str = "torch";

/// The release that deprecated [`DEPRECATED_MODULES`] (a `FutureWarning`
/// on each call from then on).
pub const DEPRECATED_IN: (u32, u32) = (2, 4);

/// The release that brought native mixed precision (`torch.cuda.amp`):
/// before it, apex was the only one.
pub const NATIVE_AMP_SINCE: (u32, u32) = (1, 6);

/// Modules torch has removed, with the release that removed them: code
/// that imports one runs only on a torch before it (`torch._six`, 2.0).
pub const REMOVED_MODULES: &[(&str, (u32, u32))] = &[("torch._six", (2, 0))];

/// The torch release that removed the module `qualified` is (or is in),
/// when it is one of [`REMOVED_MODULES`].
pub fn removed_in(qualified: &str) -> Option<(u32, u32)> {
    REMOVED_MODULES.iter().find_map(|(m, v)| {
        qualified.strip_prefix(m).is_some_and(|rest| rest.is_empty() || rest.starts_with('.')).then_some(*v)
    })
}

/// `torch.cuda.amp`, `torch.cpu.amp` and what is below them.
pub fn is_deprecated_module(q: &str) -> bool {
    DEPRECATED_MODULES.iter().any(|m| q == *m || q.strip_prefix(m).is_some_and(|rest| rest.starts_with('.')))
}

/// The replacement of a deprecated AMP API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacement {
    /// `torch.amp.<name>("<device>", ...)`.
    DeviceFirst(&'static str, &'static str),
    /// `torch.amp.<name>(..., device_type="<device>")`.
    DeviceKeyword(&'static str, &'static str),
}

/// The replacement of a deprecated name (`None`: not deprecated, or not an
/// API that has one).
pub fn replacement(qualified: &str) -> Option<Replacement> {
    Some(match qualified {
        "torch.cuda.amp.autocast" | "torch.cuda.amp.autocast_mode.autocast" => Replacement::DeviceFirst("autocast", "cuda"),
        "torch.cuda.amp.GradScaler" | "torch.cuda.amp.grad_scaler.GradScaler" => Replacement::DeviceFirst("GradScaler", "cuda"),
        "torch.cuda.amp.custom_fwd" => Replacement::DeviceKeyword("custom_fwd", "cuda"),
        "torch.cuda.amp.custom_bwd" => Replacement::DeviceKeyword("custom_bwd", "cuda"),
        "torch.cpu.amp.autocast" => Replacement::DeviceFirst("autocast", "cpu"),
        "torch.cpu.amp.GradScaler" => Replacement::DeviceFirst("GradScaler", "cpu"),
        _ => return None,
    })
}

impl Replacement {
    /// The replacing name in `torch.amp` and the device it is given.
    pub fn text(self) -> (&'static str, &'static str) {
        match self {
            Replacement::DeviceFirst(n, d) | Replacement::DeviceKeyword(n, d) => (n, d),
        }
    }

    /// `autocast`, whose first positional argument moves behind the device.
    pub fn is_autocast(self) -> bool {
        self.text().0 == "autocast"
    }

    /// The replacement as the user writes it.
    pub fn suggestion(self) -> String {
        match self {
            Replacement::DeviceFirst(n, d) => format!("{MODULE}.{n}(\"{d}\", ...)"),
            Replacement::DeviceKeyword(n, d) => format!("{MODULE}.{n}(device_type=\"{d}\")"),
        }
    }

    /// The torch version the replacement needs: `torch.amp.GradScaler("cuda")`
    /// exists since 2.3, `torch.amp.autocast("cuda")` and
    /// `torch.amp.custom_fwd(device_type=...)` since 2.4.
    pub fn needed_torch(self) -> (u32, u32) {
        match self.text().0 {
            "GradScaler" => (2, 3),
            _ => (2, 4),
        }
    }
}

/// NVIDIA apex's mixed precision (`apex.amp`), unmaintained since native
/// AMP landed in PyTorch 1.6: each call and what replaces it in `torch.amp`.
pub fn apex_replacement(qualified: &str) -> Option<(&'static str, &'static str)> {
    Some(match qualified {
        "apex.amp.initialize" => (
            "initialize",
            "drop `amp.initialize`: run the forward and the loss under `with torch.autocast(\"cuda\", dtype=torch.float16):` and create `scaler = torch.amp.GradScaler(\"cuda\")` once",
        ),
        "apex.amp.scale_loss" => (
            "scale_loss",
            "replace `with amp.scale_loss(loss, optimizer) as scaled_loss: scaled_loss.backward()` by `scaler.scale(loss).backward()`, then `scaler.step(optimizer)` and `scaler.update()`",
        ),
        "apex.amp.master_params" => (
            "master_params",
            "clip `model.parameters()` after `scaler.unscale_(optimizer)`: with native AMP the parameters are the master weights",
        ),
        _ => return None,
    })
}

/// How native AMP is spelled in a file that uses it (`torch.autocast(`,
/// `torch.cuda.amp.GradScaler`, `from torch.amp import ...`): a file with
/// one of them offers native AMP.
pub const NATIVE_AMP_SPELLINGS: &[&str] = &["autocast", "GradScaler", "torch.amp", "torch.cuda.amp"];

/// The module apex's mixed precision lives in.
pub const APEX_AMP: &str = "apex.amp";

/// The earliest torch release that removed a module `module` imports at
/// its top level, unguarded (`from torch._six import inf`): the file runs
/// only on a torch before it. An import under `try:` or `if` is
/// compatibility code and says nothing.
pub(crate) fn removed_module_imported(module: &crate::ir::Module) -> Option<(u32, u32)> {
    module
        .body
        .iter()
        .filter_map(|s| match &s.kind {
            crate::ir::StmtKind::Import(bindings) => bindings.iter().filter_map(|b| removed_in(&b.qualified)).min(),
            _ => None,
        })
        .min()
}

