//! The queries rules read about where the walk is: regions (compatibility,
//! model, step, test, grad mode, evaluation), loops and iteration lifetimes,
//! the current function and its role.

use super::*;

impl Context {
    /// Every qualified name the local name is imported as anywhere in the
    /// file (more than one for compatibility aliases).
    pub fn import_targets(&self, local: &str) -> &[String] {
        self.facts.import_targets(name_hash(local), local).unwrap_or(&[])
    }

    /// Whether the current point is compatibility code: a branch under a
    /// torch-version guard (`if TORCH_2_4:`, `if version.parse(torch.__version__) >= ...`,
    /// `hasattr(torch, "amp")`), an `except` handler, or, for the
    /// expression being visited, an operand of a conditional expression
    /// under such a guard or of an `isinstance`/`issubclass` check.
    pub fn in_compat_code(&self) -> bool {
        self.compat_depth > 0 || self.compat_expr.get() > 0
    }

    /// Whether `expr` is a target of the assignment statement being visited
    /// (`p.data` in `p.data = ...`).
    pub fn is_assign_target(&self, expr: ExprId) -> bool {
        self.assign_targets.contains(&expr)
    }

    /// When the statement being visited is a `.data =` assignment that
    /// changes the tensor's dtype, device or class (`p.data = p.data.half()`,
    /// `m.weight.data = Int8Params(...)`), which of those it changes.
    pub fn current_data_swap(&self) -> Option<&'static str> {
        self.data_swap
    }

    pub(super) fn swap_kind(&self, value: &Expr) -> Option<&'static str> {
        if let Some((_, m)) = value.as_method_call() {
            return match m {
                // tch: `to_kind`, `to_device`.
                "half" | "float" | "double" | "bfloat16" | "long" | "int" | "bool" | "type" | "to_kind" => Some("dtype"),
                "to" => Some("dtype or device"),
                "cuda" | "cpu" | "pin_memory" | "to_device" => Some("device"),
                _ => None,
            };
        }
        let (func, _, _) = value.as_call()?;
        let d = func.dotted()?;
        let last = d.rsplit('.').next().unwrap_or(&d);
        let is_class = last.starts_with(|c: char| c.is_ascii_uppercase());
        is_class.then_some("class")
    }

    /// Whether the value `expr` is only read through a method that copies
    /// or reduces it (`.detach()`, `.clone()`, `.item()`, `.norm()`,
    /// `.min()`...): no alias of it survives the expression.
    pub fn is_copied_read(&self, expr: ExprId) -> bool {
        self.copied_reads.borrow().last() == Some(&expr)
    }

    /// Whether the expression being visited only feeds an index: it sits
    /// inside an index reduction (`torch.argmax(x @ w.data.T)`), or the
    /// statement assigns or changes in place a local whose every use is an
    /// index reduction's input (a codebook's distance matrix).
    pub fn reads_into_an_index(&self) -> bool {
        self.index_expr.get() > 0 || self.index_stmt
    }

    /// Whether the statement being visited saves a `.data` into a local that
    /// the function later assigns back through `.data =` (swap-and-restore).
    pub fn saves_data_for_restore(&self) -> bool {
        self.assign_local.as_ref().is_some_and(|n| self.frame().data_restores.contains(n))
    }

    /// Whether the value `expr` is written through where it stands: the
    /// receiver of an in-place method, the base of an item assignment, an
    /// augmented-assignment or `del` target.
    pub fn is_written_through(&self, expr: ExprId) -> bool {
        self.written.borrow().contains(&expr)
    }

    /// Whether `dotted` has `backward()` called on it in an enclosing loop
    /// of the current function: a loss, a scalar.
    pub fn is_backward_root(&self, dotted: &str) -> bool {
        self.frame().loops.iter().any(|l| l.backward_roots.contains(dotted))
    }

    /// Whether `dotted` is rooted at a module constructed in the current
    /// function (`new = nn.Embedding(...)`): its parameters carry no graph yet.
    pub fn is_fresh_module(&self, dotted: &str) -> bool {
        let root = dotted.split('.').next().unwrap_or(dotted);
        let f = self.frame();
        self.frames.len() > 1 && !f.params.contains(root) && f.kinds.get(root) == Some(&ValueKind::Module)
    }

    /// The simple name of the class whose method (or a function nested
    /// in one) is being walked.
    pub fn enclosing_class_name(&self) -> Option<&str> {
        self.frames.iter().rev().find_map(|f| f.class.as_deref())
    }

    /// Whether the walk is in a method of a module class of the run that
    /// nothing of the run mentions ([`crate::ProjectIndex::is_unreferenced_module`]):
    /// its code does not run.
    pub fn in_unreferenced_module(&self) -> bool {
        // tch code builds its modules with struct literals and `new`
        // functions the summary does not read as mentions.
        if self.language() != Language::Python {
            return false;
        }
        let Some(q) = self.frames.iter().rev().find_map(|f| f.class_qualname.as_deref()) else { return false };
        self.index.is_unreferenced_module(q)
    }

    /// Whether the current function is model code: a method of an
    /// `nn.Module` class (of this file or the run), or step code reached
    /// from a `forward`/training step.
    pub fn in_model_code(&self) -> bool {
        let f = self.frame();
        if f.role == Some(Role::Step) {
            return true;
        }
        let Some(class) = &f.class else { return false };
        self.module_classes.contains(class)
            || f.class_qualname.as_ref().is_some_and(|q| self.index.class_is_module(q) == Some(true))
    }

    /// Whether the current point runs once per step: inside (possibly
    /// nested in) a loop one iteration of which is one training or
    /// evaluation step, not only in an epoch loop around it.
    pub fn in_step_iteration(&self) -> bool {
        self.frame().loops.iter().any(|l| l.direct_step)
    }

    /// Whether the current point is in a function reached only once per
    /// epoch of a training loop or less often, under a logging interval
    /// ([`ProjectIndex::is_reached_once_per_epoch`]): its loops run a few
    /// times per epoch, however many times each.
    pub fn in_code_reached_once_per_epoch(&self) -> bool {
        self.function_qualname().is_some_and(|q| self.index.is_reached_once_per_epoch(q))
    }

    /// Whether the code here runs a few times per program, epoch or
    /// evaluation: module-level code, or a function every known call of
    /// which runs outside loops or once per epoch
    /// ([`ProjectIndex::is_rarely_called`]).
    pub fn in_rarely_run_code(&self) -> bool {
        match self.function_qualname() {
            None => !self.frame().is_class,
            Some(q) => self.index.is_rarely_called(q),
        }
    }

    /// Whether the current point runs once per pass over the data: the
    /// innermost loop around it is a training loop one iteration of which
    /// is not a step (an epoch loop, its steps in a nested loop or in a
    /// helper that loops). A loop nested in the epoch loop (a rollout over
    /// environment steps, a sampling loop) runs many times per epoch; a
    /// loop over a few fixed items that trains nothing (`for w in [0.0,
    /// 0.5, 2.0]:`, a sample per guidance weight) is looked through.
    pub fn in_epoch_loop_only(&self) -> bool {
        self.frame().loops.iter().rev().find(|l| !l.few || l.kind != LoopKind::Other).is_some_and(|l| l.kind == LoopKind::Train && !l.direct_step)
    }

    /// Whether the current point runs once per training step: the
    /// innermost loop one iteration of which is a step
    /// ([`Context::in_step_iteration`]) is a training loop, not an
    /// evaluation loop nested in the epoch loop.
    pub fn in_training_step(&self) -> bool {
        self.frame().loops.iter().rev().find(|l| l.direct_step).is_some_and(|l| l.kind == LoopKind::Train)
    }

    /// The innermost loop one iteration of which is a training step
    /// ([`Context::in_training_step`]), when the current point is in one.
    pub fn training_step_loop(&self) -> Option<crate::ir::StmtId> {
        self.frame().loops.iter().rev().find(|l| l.direct_step).filter(|l| l.kind == LoopKind::Train).map(|l| l.id)
    }

    /// The innermost loop over phases around the current point (`for
    /// phase in ["train", "val"]:`, training under `if phase ==
    /// "train":`), with its variable.
    pub fn phase_loop(&self) -> Option<(crate::ir::StmtId, &str)> {
        self.frame().loops.iter().rev().find_map(|l| Some((l.id, l.phase.as_deref()?)))
    }

    /// The innermost training loop around the current point (one
    /// iteration of which runs `backward()`, itself or through helpers).
    pub fn training_loop(&self) -> Option<crate::ir::StmtId> {
        self.frame().loops.iter().rev().find(|l| l.kind == LoopKind::Train).map(|l| l.id)
    }

    /// Whether the innermost training loop around the current point calls
    /// a project function that empties one of `buffers` (dotted names:
    /// `pi.data` emptied by `pi.train_net()` doing `self.data = []`,
    /// `policy.saved_log_probs` by `finish_episode()` doing `del
    /// policy.saved_log_probs[:]`): the buffer is consumed and cleared as
    /// the loop goes, not kept.
    pub fn loop_empties(&self, module: &crate::ir::Module, buffers: &[String]) -> bool {
        let Some(lp) = self.training_loop().and_then(|id| module.stmt(id)) else { return false };
        let mut found = false;
        crate::ir::for_each_stmt_in_function(std::slice::from_ref(lp), &mut |s| {
            s.for_each_expr(|e| {
                found |= e.any(&mut |x| {
                    let Some(f) = self.project_callee(x) else { return false };
                    let receiver = x.as_method_call().and_then(|(r, _)| r.dotted());
                    f.empties.iter().any(|emptied| {
                        let name = match (emptied.strip_prefix("self."), &receiver) {
                            (Some(attr), Some(r)) => format!("{}.{attr}", r.as_str()),
                            (Some(_), None) => return false,
                            (None, _) => emptied.clone(),
                        };
                        buffers.contains(&name)
                    })
                });
            });
        });
        found
    }

    /// The innermost loop over parameters around the current point
    /// ([`Context::in_parameter_loop`]).
    pub fn parameter_loop(&self) -> Option<crate::ir::StmtId> {
        self.frame().loops.iter().rev().find(|l| l.over_parameters).map(|l| l.id)
    }

    /// Whether the current point runs only every k-th time: inside the body
    /// of `if step % k == 0:` (or `(i + 1) % k == 0`, `step % k == k - 1`).
    pub fn guarded_by_interval(&self) -> bool {
        self.interval_depth > 0
    }

    /// Whether the current point runs only when a user option enables it
    /// (the body of `if args.empty_unused_memory_level >= 1:`, `if
    /// self.config.clear_cache:`): a deliberate, configurable choice.
    pub fn guarded_by_option(&self) -> bool {
        self.option_depth > 0
    }

    /// Whether the current point runs on every call of its function:
    /// outside any `if` arm and `try` statement of it (loops count: their
    /// bodies run for each item).
    pub fn runs_on_every_call(&self) -> bool {
        self.frame().cond_depth == 0
    }

    /// Whether the current point runs only now and then: when an option
    /// of the class that is off by default is turned on (the body of `if
    /// self.individual:` in a method of a class whose `__init__` takes
    /// `individual=False` and keeps it as `self.individual`: a variant a
    /// caller must ask for), when values have gone bad (the body of
    /// `if torch.isnan(k).any():`, a recovery path), or never (`if
    /// custom_shape is not None:` where the function binds `custom_shape`
    /// only to `None`, `facts::guards::unset_locals`).
    pub fn in_rarely_taken_branch(&self) -> bool {
        self.rare_branch_depth > 0 || self.once_depth > 0
    }

    /// Whether the current point runs once per object: the body of an `if`
    /// that sets the attribute its test reads (`if not self.initialized:
    /// ...; self.initialized = True`, ActNorm's data-dependent
    /// initialisation in `forward`).
    pub fn in_run_once_branch(&self) -> bool {
        self.once_depth > 0
    }

    /// For `if <param> is None:` (or `is not None`) on a parameter of the
    /// current function that defaults to `None`: whether the `if` arm and
    /// the `else` arm are never taken by the project's calls, which all
    /// pass the argument or none does
    /// ([`crate::index::FunctionSummary::none_params_passed`]). A fallback
    /// every caller skips by passing a mask runs for no step.
    pub(super) fn optional_argument_arms(&self, test: &Expr) -> (bool, bool) {
        let ExprKind::Compare { left, ops, comparators } = &test.kind else { return (false, false) };
        let (Some(name), [op], [right]) = (left.as_name(), &ops[..], &comparators[..]) else { return (false, false) };
        if !right.is_none() || self.index.is_empty() {
            return (false, false);
        }
        let Some(f) = self.function_qualname().and_then(|q| self.index.function(q)) else { return (false, false) };
        let Some(i) = f.none_params.iter().position(|(_, p)| p == name) else { return (false, false) };
        let Some(Some(passed)) = f.none_params_passed.get(i).copied() else { return (false, false) };
        // `is None` holds on the calls that do not pass it.
        let none_arm_taken = !passed;
        match op {
            crate::ir::CmpOp::Is => (!none_arm_taken, none_arm_taken),
            crate::ir::CmpOp::IsNot => (none_arm_taken, !none_arm_taken),
            _ => (false, false),
        }
    }

    /// For `if flag:` / `if not flag:` on a flag parameter of the current
    /// function (default `True` or `False`), or on an attribute its class's
    /// `__init__` sets from one (`if self.ln:` with `self.ln = ln`): when
    /// every call of the project gives it the same literal
    /// ([`crate::index::FunctionSummary::flag_values`]; for the attribute,
    /// every construction of the class), whether the `if` arm and the
    /// `else` arm are never taken. `None` when the value is not known.
    pub(super) fn fixed_flag_arms(&self, test: &Expr) -> Option<(bool, bool)> {
        if self.index.is_empty() {
            return None;
        }
        // `if init:`, `if not init:`, `if init is True:`, `if init == False:`.
        let (subject, negated) = crate::facts::guards::flag_test(test)?;
        let value_of = |function: &str, param: &str| {
            let f = self.index.function(function)?;
            let i = f.flag_params.iter().position(|(_, p, _)| p == param)?;
            f.flag_values.get(i).copied().flatten()
        };
        let value = match &subject.kind {
            ExprKind::Name(n) => value_of(self.function_qualname()?, n)?,
            ExprKind::Attribute { value, attr, .. } if value.as_name() == Some("self") => {
                let class = self.current_class()?;
                let param = self.class_flag_options.get(class)?.get(attr.as_str())?;
                value_of(&format!("{class}.__init__"), param)?
            }
            _ => return None,
        };
        let holds = value != negated;
        Some((!holds, holds))
    }

    /// Whether an `if` test turns on an option of the current class that
    /// is off by default: `self.individual`, alone or in an `and`.
    pub(super) fn tests_an_off_option(&self, test: &Expr) -> bool {
        let Some(options) = self.current_class().and_then(|c| self.class_off_options.get(c)) else { return false };
        let reads_option = |e: &Expr| e.dotted().as_deref().and_then(|d| d.strip_prefix("self.")).is_some_and(|a| options.contains(a));
        match &test.kind {
            ExprKind::BoolOp { op: crate::ir::BoolOpKind::And, values } => values.iter().any(reads_option),
            _ => reads_option(test),
        }
    }

    /// Whether the current point runs only under a logging, debugging or
    /// profiling condition, or a user option: the body of `if
    /// args.verbose:`, `if log_now:`, `if cfg.profile:`, `if
    /// self.config.track_norms:` (an interval guard is
    /// [`Context::guarded_by_interval`]).
    pub fn guarded_by_logging_condition(&self) -> bool {
        self.logging_depth > 0
    }

    /// Whether the current point is under a logging, debugging or
    /// profiling condition (`if self.debug_mode:`, `if log_now:`), not
    /// merely a user option ([`Context::guarded_by_logging_condition`]).
    pub fn guarded_by_debug_condition(&self) -> bool {
        self.debug_depth > 0
    }

    /// Whether `e` calls a model somewhere in it, or a method of one
    /// (`model(x)`, `self.G(z)`, `policy.act(obs)` on a model).
    pub fn calls_a_model(&self, e: &Expr) -> bool {
        e.any(&mut |x| match &x.kind {
            ExprKind::Call { func, .. } => {
                self.is_model(func) || matches!(&func.kind, ExprKind::Attribute { value, .. } if self.is_model(value))
            }
            _ => false,
        })
    }

    /// Whether the current point runs only while a module is in train mode
    /// (`if model.training:`, the `else` of `if not self.training:`): an
    /// evaluation that calls this function skips it.
    pub fn in_train_mode_arm(&self) -> bool {
        self.frame().train_mode_depth > 0
    }

    /// Whether the current point is in an `except` handler: it runs only
    /// when something failed.
    pub fn in_exception_handler(&self) -> bool {
        !self.handlers.is_empty()
    }

    /// Whether the current point is in an `except` handler catching one of
    /// the named exception classes (by last segment; a bare `except:` and
    /// `Exception` catch everything).
    pub fn in_handler_catching(&self, names: &[&str]) -> bool {
        self.handlers.iter().any(|h| {
            h.iter().any(|t| names.contains(&t.as_str()) || t == "Exception" || t == "BaseException")
        })
    }

    /// Whether the current point is the fallback of an optional import:
    /// an `except ImportError:` (or `ModuleNotFoundError`, `Exception`, a
    /// bare `except:`) handler.
    pub fn in_import_fallback(&self) -> bool {
        self.in_handler_catching(&["ImportError", "ModuleNotFoundError"])
    }

    /// Whether the file is a test module (its code is unit tests and their
    /// helpers: hazards there do not reach training runs).
    pub fn in_test_module(&self) -> bool {
        self.options.is_test_file
    }

    /// Whether the walk is directly in a class body.
    pub fn in_class_body(&self) -> bool {
        self.frame().is_class
    }

    /// Where the file sits in the module tree.
    pub fn module_info(&self) -> &ModuleInfo {
        &self.module
    }

    /// Qualified names of the enclosing `with` contexts that are not torch's.
    pub fn with_contexts(&self) -> Vec<String> {
        self.frame().with_contexts.clone()
    }

    /// Whether the current point is inside a training or evaluation loop
    /// of the current function.
    pub fn in_step_loop(&self) -> bool {
        self.frame().loops.iter().any(|l| matches!(l.kind, LoopKind::Train | LoopKind::Eval))
    }

    /// The lowest torch version the project declares (`None`: undeclared).
    pub fn declared_torch_minimum(&self) -> Option<(u32, u32)> {
        self.options.torch_minimum
    }

    /// A torch version every torch the project runs on is below: the
    /// lower of what it declares ([`ContextOptions::torch_below`]) and what
    /// its code shows (an import of a module torch has removed since,
    /// [`ProjectIndex::torch_below`]).
    pub fn torch_below(&self) -> Option<(u32, u32)> {
        self.options.torch_below.into_iter().chain(self.index.torch_below()).min()
    }

    /// The project index of the run.
    pub fn index(&self) -> &ProjectIndex {
        &self.index
    }

    /// The identifiers of [`Words`] the function being walked mentions (the
    /// whole file's at module level): a rule looking for `scaler.scale(...)`
    /// has nothing to find where `scale` is never named.
    pub fn function_words(&self) -> Words {
        self.frame().words
    }

    /// The identifiers of [`Words`] the whole file mentions.
    pub fn file_words(&self) -> Words {
        self.frames[0].words
    }

    /// Whether the program runs on the CPU only: the file never mentions
    /// CUDA (no `.cuda()`, `torch.cuda`, `"cuda"`) and binds a device name
    /// at module level to the CPU and never to anything else (`device =
    /// torch.device("cpu")`, in a cell after the `def train(model,
    /// device, ...)` that receives it). Asked once the walk is done.
    pub fn cpu_only_program(&self) -> bool {
        let f = &self.frames[0];
        !f.words.contains(Words::CUDA) && !f.cpu_devices.is_empty() && f.cpu_devices.iter().all(|n| !f.other_devices.contains(n))
    }

    /// The qualified name of the function being walked (`module.Class.method`).
    pub fn function_qualname(&self) -> Option<&str> {
        self.frame().qualname.as_deref()
    }

    /// The role of the current function (module level: `Other`).
    pub fn function_role(&self) -> Role {
        self.frame().role.unwrap_or(Role::Other)
    }

    /// Whether the current point is step code, where a graph may be live:
    /// inside a training or evaluation loop, or in a function that is a
    /// step (a `forward`, an optimizer's `step`, a function with a step
    /// loop, or one called from step code in any file of the run). Never in
    /// unit tests, and never in always-setup code (`__init__`,
    /// `reset_parameters`, weight init passed to `.apply`).
    pub fn in_step_code(&self) -> bool {
        let f = self.frame();
        match f.role {
            Some(Role::Test) => false,
            Some(Role::Setup) => false,
            Some(Role::Step) => true,
            _ => f.loops.iter().any(|l| matches!(l.kind, LoopKind::Train | LoopKind::Eval)),
        }
    }


    /// Whether a graph may be live here: on some path to this point a
    /// graph was built (or, in step code, a caller's may be live) and no
    /// `backward()` without `retain_graph=True` has freed it since. A
    /// `backward()` frees the graph behind its own loss only; one built for
    /// another loss (a GAN's generator, when the discriminator's loss was
    /// fed `fake.detach()`) may still be live, and is not told apart.
    pub fn graph_may_be_live(&self) -> bool {
        self.frame().graph_built
    }

    /// Whether a live graph may still run `backward()`: one may be live
    /// ([`Context::graph_may_be_live`]) and no optimizer has stepped since
    /// it was built. After `loss.backward(retain_graph=flag); opt.step()`
    /// the graph still holds its memory, but its saved parameters were
    /// changed in place: a `.data` write to them corrupts nothing a
    /// backward could still read.
    pub fn graph_may_run_backward(&self) -> bool {
        self.frame().graph_built && !self.frame().stepped
    }

    /// Whether `name` is bound to a batch of a data loader (`x` of `for x,
    /// y in loader`) and not rebound since: a tensor built from data, which
    /// requires no grad.
    pub fn is_batch(&self, name: &str) -> bool {
        if let Some(b) = self.comp_binding(name) {
            return b.batch && b.name.len() == name.len();
        }
        self.frame().batches.contains(name)
    }

    /// Whether the current point is in a loop over data (a loader, a
    /// dataset, batches) in this function, or in a comprehension over data.
    pub fn in_data_loop(&self) -> bool {
        self.data_comprehension.get() > 0 || self.frame().loops.iter().any(|l| l.over_data)
    }

    /// Whether the current point runs now and then inside a training step:
    /// under an interval guard (`if (i + 1) % 100 == 0:`), with the
    /// innermost loop over data a training-step loop (a display batch drawn
    /// every hundred steps, not a validation loop under the guard).
    pub fn periodic_in_training_step(&self) -> bool {
        self.guarded_by_interval()
            && self.data_comprehension.get() == 0
            && self.frame().loops.iter().rev().find(|l| l.over_data).is_some_and(|l| l.direct_step && l.kind == LoopKind::Train)
    }

    /// Whether an enclosing loop runs an adversarial attack (`adv =
    /// adversary.perturb(x, y)`): adversarial evaluation, which needs
    /// autograd on for the attack.
    pub fn in_attack_loop(&self) -> bool {
        self.frame().loops.iter().any(|l| l.runs_attack)
    }

    /// Whether the current point is in a loop that steps an environment
    /// (`env.step(action)`, `envs.step(...)`): reinforcement learning's
    /// interaction loop, where a forward on one observation picks an action.
    pub fn in_interaction_loop(&self) -> bool {
        self.frame().loops.iter().any(|l| l.steps_env)
    }

    /// Whether autograd records operations at this point: not inside
    /// `torch.no_grad()`/`torch.inference_mode()` (as a `with` block or a
    /// decorator of the current function) nor after `torch.set_grad_enabled(False)`.
    /// A grad mode that cannot be decided (`set_grad_enabled(flag)`) counts as off.
    pub fn grad_enabled(&self) -> bool {
        if self.no_grad_expr.get() > 0 {
            return false;
        }
        let f = self.frame();
        if let Some(top) = f.with_grad.last() {
            return top.unwrap_or(false);
        }
        if let Some(g) = f.set_grad {
            return g;
        }
        !f.decorator_no_grad
    }

    /// Whether the current point is evaluation code: after `model.eval()` in
    /// the same function, in a function named like validate/evaluate/test/
    /// predict/inference, or in a loop over a validation/test loader.
    pub fn in_eval_code(&self) -> bool {
        let f = self.frame();
        !f.unit_test
            && (f.eval_mode || f.eval_named || f.eval_by_flag || f.loops.iter().any(|l| l.kind == LoopKind::Eval))
    }

    /// Whether a `backward()` belongs to the code around the current point,
    /// making it training (or adversarial evaluation) rather than plain
    /// evaluation: inside loops, the enclosing loops up to the innermost
    /// evaluation loop call it; outside every loop, the function calls it
    /// outside its loops. An evaluation loop that follows a training loop
    /// in the same function is therefore still evaluation.
    pub fn backward_in_scope(&self) -> bool {
        let f = self.frame();
        for (i, l) in f.loops.iter().enumerate().rev() {
            if l.calls_backward {
                // An epoch loop that trained in its nested batch loop, then
                // called `model.eval()` and trains no more this iteration
                // (sampling a GAN's generator each epoch): from `.eval()`
                // to `.train()` is evaluation.
                if f.eval_mode && i < f.eval_depth && self.current_stmt.start >= l.backward_before {
                    return false;
                }
                return true;
            }
            if l.kind == LoopKind::Eval {
                return false;
            }
        }
        // No enclosing loop decides: the function's own backward does.
        f.backward_outside_loops
    }

    /// The id of the statement being visited.
    pub fn current_stmt_id(&self) -> crate::ir::StmtId {
        self.current_stmt_id
    }

    /// The train-mode flag of a function some caller passes the value
    /// that says evaluation: the parameter's name, and whether `True` says
    /// evaluation (`cross_valid`) rather than training (`train`).
    pub fn eval_flag(&self) -> Option<(&str, bool)> {
        let f = self.frame();
        f.flag_param.as_deref().map(|p| (p, f.flag_negated))
    }

    /// The name of the innermost function, `None` at module level.
    pub fn function_name(&self) -> Option<&str> {
        self.frame().name.as_deref()
    }

    /// Whether the current point is benchmarking or profiling code: the
    /// function or the module is named for it (`bench_step`,
    /// `benchmarks/bench_rnn.py`, `profile_model`, `timing.py`). Such code
    /// waits for the device and empties its cache on purpose, to measure.
    pub fn in_benchmark_code(&self) -> bool {
        let timing = |name: &str| {
            crate::resolve::words(name)
                .iter()
                .any(|w| w.starts_with("bench") || w.starts_with("profil") || w == "timing" || w == "timeit")
        };
        self.function_name().is_some_and(timing) || self.module_info().path.rsplit('.').next().is_some_and(timing)
    }

    /// Whether the current point is in a loop over files found on disk
    /// (`for path in sorted(glob.glob(...))`) and in no training loop: an
    /// inference script's loop over a folder of inputs, whose sizes vary.
    pub fn in_loop_over_files(&self) -> bool {
        let loops = &self.frame().loops;
        loops.iter().any(|l| l.over_files) && !self.in_training_loop()
    }

    /// Whether the current point is inside a training loop (one whose body
    /// reaches `backward()`), within the current function.
    pub fn in_training_loop(&self) -> bool {
        self.frame().loops.iter().any(|l| l.kind == LoopKind::Train)
    }

    /// Whether the current point is inside a loop over parameters (`for p
    /// in model.parameters()`, over an optimizer group's `"params"`) in the
    /// current function: it runs once per parameter.
    pub fn in_parameter_loop(&self) -> bool {
        self.frame().loops.iter().any(|l| l.over_parameters)
    }

    /// How many steps the current point's training runs, where the code
    /// says: in top-level code (a script, a notebook cell), the outermost
    /// loop trains in its own body (not only in a nested loop) and its
    /// count is written in the code (`for i in range(grad_steps):` with
    /// `grad_steps = 30`). In a function, which may run once per step of
    /// a caller's loop, or in a nested loop, the count is not the run's.
    /// Returns the loop with its count.
    pub fn counted_training_steps(&self) -> Option<(crate::ir::StmtId, i64)> {
        if self.frames.len() > 1 {
            return None;
        }
        let l = self.frame().loops.first()?;
        l.count.filter(|_| l.kind == LoopKind::Train && l.direct_step).map(|k| (l.id, k))
    }

    /// Whether the current point is inside a loop of the current function
    /// that runs more than a few times (not `range(3)` nor a few constants).
    pub fn in_long_loop(&self) -> bool {
        self.frame().loops.iter().any(|l| !l.few)
    }

    /// Whether the current point is inside any loop of the current function.
    pub fn in_loop(&self) -> bool {
        !self.frame().loops.is_empty()
    }

    /// Whether `dotted` (a name or `self.attr`) keeps its value across the
    /// iterations of the innermost training loop: it is not reassigned (from
    /// a value that does not read it) in that loop or any loop inside it.
    pub fn outlives_training_iteration(&self, dotted: &str) -> bool {
        let loops = &self.frame().loops;
        let Some(train) = loops.iter().rposition(|l| l.kind == LoopKind::Train) else {
            return false;
        };
        let at = self.current_stmt_id;
        loops[train..].iter().all(|l| !l.unconditional.get(dotted).is_some_and(|stmts| stmts.contains(&at)))
    }

    /// Whether `dotted` is assigned anew (from a value that does not read
    /// it) somewhere in the innermost training loop, under an `if` included:
    /// an accumulator reset at each optimizer step or logging interval.
    pub fn reset_in_training_loop(&self, dotted: &str) -> bool {
        self.frame().loops.iter().rev().find(|l| l.kind == LoopKind::Train).is_some_and(|l| l.resets.contains(dotted))
    }

    /// Whether `dotted` is assigned anew by a loop around the innermost
    /// training loop (`outputs = []` each step of a loop over batches, the
    /// inner loop over micro-batches) and a `backward()` of the inner
    /// loop's iteration follows the current statement: what it holds lives
    /// for one outer step, and each value's saved tensors are freed by the
    /// backward of its own iteration. Not when the inner loop iterates
    /// over data and the loop that assigns `dotted` anew does not (`for
    /// epoch in range(n): total = 0; for x, y in loader: ...`): that is a
    /// total over an epoch, whose graphs pile up for every step of it.
    pub fn kept_for_one_outer_step(&self, dotted: &str) -> bool {
        let loops = &self.frame().loops;
        let Some(train) = loops.iter().rposition(|l| l.kind == LoopKind::Train) else {
            return false;
        };
        let inner = &loops[train];
        inner.calls_backward
            && inner.backward_before != u32::MAX
            && inner.backward_before >= self.current_stmt.end
            && loops[..train].iter().any(|l| l.resets.contains(dotted) && (l.over_data || !inner.over_data))
    }

    /// Whether `dotted` keeps its value across iterations of the innermost loop.
    pub fn outlives_iteration(&self, dotted: &str) -> bool {
        match self.frame().loops.last() {
            Some(l) => !l.resets.contains(dotted),
            None => false,
        }
    }

    /// Whether `dotted` is a per-iteration value of the innermost loop
    /// (assigned in its body, or its loop variable).
    pub fn is_iteration_local(&self, dotted: &str) -> bool {
        match self.frame().loops.last() {
            Some(l) => l.resets.contains(dotted),
            None => false,
        }
    }

}
