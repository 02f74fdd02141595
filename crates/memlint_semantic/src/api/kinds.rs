//! Sets of training-step events, as the project index records what
//! calling a function does.

/// A set of step events, as a function summary records what calling the
/// function does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StepKinds(u8);

impl StepKinds {
    /// Calls `backward()`.
    pub const BACKWARD: StepKinds = StepKinds(1);
    /// Steps an optimizer (directly or through a scaler).
    pub const OPT_STEP: StepKinds = StepKinds(2);
    /// Zeroes gradients (`zero_grad()`, `p.grad = None`).
    pub const ZERO: StepKinds = StepKinds(4);
    /// `scaler.update()`.
    pub const SCALER_UPDATE: StepKinds = StepKinds(8);
    /// `scaler.unscale_(optimizer)`.
    pub const SCALER_UNSCALE: StepKinds = StepKinds(16);
    /// `scaler.step(optimizer)`.
    pub const SCALER_STEP: StepKinds = StepKinds(32);

    /// The empty set.
    pub const fn empty() -> StepKinds {
        StepKinds(0)
    }

    /// Whether every event of `other` is in the set.
    pub const fn contains(self, other: StepKinds) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for StepKinds {
    type Output = StepKinds;
    fn bitor(self, rhs: StepKinds) -> StepKinds {
        StepKinds(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for StepKinds {
    fn bitor_assign(&mut self, rhs: StepKinds) {
        self.0 |= rhs.0;
    }
}
