//! The language-neutral intermediate representation that frontends lower
//! into. It keeps only what training-code rules need: statements with their
//! control structure, calls, attribute chains, subscripts, operators and
//! literals. Every node carries the byte [`Span`] of its source.

use memlint_diagnostics::Span;

pub mod cfg;
mod dump;
pub mod pack;
mod tree;
mod visit;
mod words;

pub use dump::dump;
pub use tree::{Arm, ExprId, StmtId, Tree};
pub use visit::{bound_names, for_each_expr_in_function, for_each_stmt_in_function, for_each_stmt_in_module};
pub use words::Words;
use visit::expr_blocks;

/// An identifier (a name, an attribute): short ones, nearly all of them,
/// are stored inline, without a heap allocation.
pub type Ident = compact_str::CompactString;

/// Source language of a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Language {
    /// Python using PyTorch.
    #[default]
    Python,
    /// Rust using the `tch` crate.
    Rust,
}

impl Language {
    /// Short name used in rule metadata (`py`, `rs`).
    pub fn short(self) -> &'static str {
        match self {
            Language::Python => "py",
            Language::Rust => "rs",
        }
    }
}

/// A lowered source file.
#[derive(Debug, Clone)]
pub struct Module {
    /// Source language.
    pub language: Language,
    /// Top-level statements.
    pub body: Vec<Stmt>,
    /// The identifiers of [`Words`] that the whole file mentions.
    pub words: Words,
    /// Where each statement and expression sits ([`Tree`]).
    pub tree: Tree,
}

impl Module {
    /// A module of `body`: numbers every statement and expression in
    /// source order ([`StmtId`], [`ExprId`]) and records the tree of
    /// statements. Frontends build modules with this only, so ids do not
    /// depend on the language.
    pub fn new(language: Language, mut body: Vec<Stmt>, words: Words) -> Module {
        let tree = Tree::number(&mut body);
        Module { language, body, words, tree }
    }

    /// The statement with id `id`, found by descending the tree (ids grow
    /// in source order, so each level is a binary search).
    pub fn stmt(&self, id: StmtId) -> Option<&Stmt> {
        let mut block: &[Stmt] = &self.body;
        loop {
            let at = block.partition_point(|s| s.id <= id).checked_sub(1)?;
            let s = &block[at];
            if s.id == id {
                return Some(s);
            }
            let holds = |b: &&[Stmt]| b.first().is_some_and(|f| f.id <= id) && b.last().is_some_and(|l| self.tree.last_in(l.id) >= id);
            block = match s.all_blocks().find(holds) {
                Some(b) => b,
                // A statement in a block expression (Rust) of `s`.
                None => {
                    let mut blocks = Vec::new();
                    s.for_each_expr(|e| expr_blocks(e, &mut blocks));
                    blocks.into_iter().find(holds)?
                }
            };
        }
    }

    /// The innermost statement whose span holds byte `offset` (a simple
    /// statement, or the compound statement whose header it is in).
    pub fn stmt_at(&self, offset: u32) -> Option<StmtId> {
        // In each block only the last statement starting at or before
        // `offset` can hold it; its blocks are searched even past its own
        // span (an `elif` clause's span ends before the clauses nested in
        // its `else`).
        fn find(block: &[Stmt], offset: u32) -> Option<StmtId> {
            let at = block.partition_point(|s| s.span.start <= offset).checked_sub(1)?;
            let s = &block[at];
            s.all_blocks()
                .find_map(|b| find(b, offset))
                .or_else(|| (s.span.start <= offset && offset <= s.span.end).then_some(s.id))
        }
        find(&self.body, offset)
    }

    /// The block that holds statement `id`, and its position there
    /// (`None` for statements in a block expression).
    pub fn block_of(&self, id: StmtId) -> Option<(&[Stmt], usize)> {
        let block: &[Stmt] = match self.tree.parent(id) {
            None => &self.body,
            Some(p) => self.stmt(p)?.all_blocks().find(|b| b.iter().any(|s| s.id == id))?,
        };
        Some((block, block.iter().position(|s| s.id == id)?))
    }

    /// The statement just before `id` in its block (`None` for the first
    /// of a block, and for statements in a block expression).
    pub fn previous_sibling(&self, id: StmtId) -> Option<&Stmt> {
        let (block, at) = self.block_of(id)?;
        block.get(at.checked_sub(1)?)
    }

    /// The body of the innermost function that contains statement `id`
    /// (`None` at the top level of the module or of a class).
    pub fn enclosing_function_body(&self, id: StmtId) -> Option<&[Stmt]> {
        match &self.stmt(self.tree.enclosing_function(id)?)?.kind {
            StmtKind::Function(f) => Some(&f.body),
            _ => None,
        }
    }
}

/// A statement.
#[derive(Debug, Clone)]
pub struct Stmt {
    /// Source span of the whole statement.
    pub span: Span,
    /// Its identity in the module ([`StmtId::DETACHED`] until
    /// [`Module::new`] numbers it).
    pub id: StmtId,
    /// What the statement is.
    pub kind: StmtKind,
}

/// Binary operators that matter for dataflow; the rest are `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mult,
    /// `/`
    Div,
    /// `//`
    FloorDiv,
    /// `%`
    Mod,
    /// `**`
    Pow,
    /// `@`
    MatMult,
    /// Bitwise and shift operators.
    Other,
}

/// One `import` binding: `import a.b as c` or `from a.b import c as d`.
#[derive(Debug, Clone)]
pub struct ImportBinding {
    /// The name bound in the scope (`c` / `d`; `a` for a plain `import a.b`).
    pub local: String,
    /// The qualified name the binding refers to (`a.b`, `a.b.c`; `a` for a plain `import a.b`).
    pub qualified: String,
    /// Span of the alias in the import statement.
    pub span: Span,
}

/// A function parameter.
#[derive(Debug, Clone)]
pub struct Param {
    /// Parameter name.
    pub name: String,
    /// Type annotation, when written.
    pub annotation: Option<Expr>,
    /// Default value, when written.
    pub default: Option<Expr>,
}

/// A function (or method) definition.
#[derive(Debug, Clone)]
pub struct Function {
    /// Function name.
    pub name: String,
    /// Span of the name.
    pub name_span: Span,
    /// Decorator expressions (Python) or attributes (Rust), outermost first.
    pub decorators: Vec<Expr>,
    /// Parameters in order.
    pub params: Vec<Param>,
    /// How many of `params`, from the first, may be passed by position
    /// (Python's positional-only and positional-or-keyword parameters);
    /// keyword-only ones follow, then `*args` and `**kwargs` when the
    /// function has them.
    pub positional: u16,
    /// The function takes `*args`: any number of positional arguments.
    pub var_positional: bool,
    /// The function takes `**kwargs`: any keyword argument.
    pub var_keywords: bool,
    /// Body statements.
    pub body: Vec<Stmt>,
    /// The identifiers of [`Words`] the definition mentions (decorators,
    /// parameters and nested definitions included).
    pub words: Words,
    /// The names the body binds ([`bound_names`]), sorted: computed once
    /// when the function is lowered, shared by every walk of it.
    pub locals: std::sync::Arc<[Ident]>,
}

/// A class definition (boxed in [`StmtKind`]: classes are rare, and a
/// large variant would widen every statement).
#[derive(Debug, Clone)]
pub struct Class {
    /// Class name.
    pub name: String,
    /// Base classes.
    pub bases: Box<[Expr]>,
    /// Decorators.
    pub decorators: Box<[Expr]>,
    /// Body.
    pub body: Vec<Stmt>,
}

/// A `try` statement (boxed in [`StmtKind`], as [`Class`]).
#[derive(Debug, Clone)]
pub struct Try {
    /// The guarded block.
    pub body: Vec<Stmt>,
    /// The `except` clauses in order.
    pub handlers: Box<[Handler]>,
    /// The `else` block (runs when `body` raised nothing).
    pub orelse: Vec<Stmt>,
    /// The `finally` block.
    pub finalbody: Box<[Stmt]>,
}

/// One `except` clause of a `try` statement.
#[derive(Debug, Clone)]
pub struct Handler {
    /// Span of the whole clause.
    pub span: Span,
    /// The caught exception type(s), `None` for a bare `except:`.
    pub types: Option<Expr>,
    /// The `as` name.
    pub name: Option<String>,
    /// The clause body.
    pub body: Vec<Stmt>,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtE,
    /// `>`
    Gt,
    /// `>=`
    GtE,
    /// `is`
    Is,
    /// `is not`
    IsNot,
    /// `in`
    In,
    /// `not in`
    NotIn,
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Pos,
    /// `not x` (Python), `!x` (Rust).
    Not,
    /// `~x` (Python).
    Invert,
    /// `&x` (Rust): a borrow, the value itself is passed.
    Ref,
    /// `&mut x` (Rust): a mutable borrow.
    RefMut,
    /// `*x` (Rust): a dereference.
    Deref,
}

/// Boolean operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoolOpKind {
    /// `and`
    And,
    /// `or`
    Or,
}

/// A comprehension: its generators in order, then the element (`key:
/// value` for a dict comprehension).
#[derive(Debug, Clone)]
pub struct Comprehension {
    /// `for target in iter if cond...`, outermost first.
    pub generators: Vec<Generator>,
    /// The key of a dict comprehension.
    pub key: Option<Expr>,
    /// The element (the value of a dict comprehension).
    pub elt: Expr,
}

/// One `for target in iter if cond...` clause of a comprehension.
#[derive(Debug, Clone)]
pub struct Generator {
    /// What each item binds (a name, a tuple of names).
    pub target: Expr,
    /// What is iterated.
    pub iter: Expr,
    /// The `if` conditions.
    pub ifs: Vec<Expr>,
}

/// A closure (`lambda`, `|x| ...`).
#[derive(Debug, Clone)]
pub struct Closure {
    /// Parameters in order.
    pub params: Vec<Param>,
    /// The body: an expression (Python), often a [`ExprKind::Block`] (Rust).
    pub body: Expr,
}

/// A block expression: statements, then the value of the block.
#[derive(Debug, Clone)]
pub struct Block {
    /// The statements, in order.
    pub stmts: Vec<Stmt>,
    /// The value the block evaluates to (Rust's tail expression), if any.
    pub tail: Option<Expr>,
}

/// A struct literal.
#[derive(Debug, Clone)]
pub struct StructLit {
    /// The struct's path, as a name or attribute chain (`nn::LinearConfig`
    /// lowers like `nn.LinearConfig`).
    pub path: Expr,
    /// The fields in order, with their values.
    pub fields: Vec<(Ident, Expr)>,
    /// The base of `..rest`.
    pub rest: Option<Expr>,
}

/// A macro call.
#[derive(Debug, Clone)]
pub struct MacroCall {
    /// The macro's path (`println`, `tch::kind`).
    pub path: Expr,
    /// The arguments, when they parse as comma-separated expressions
    /// (`println!`, `format!`, `assert!`, `vec!`).
    pub args: Vec<Expr>,
    /// Whether `args` are the macro's whole input; `false` when its tokens
    /// could not be read as expressions (nothing inside is seen).
    pub parsed: bool,
}

/// A context manager in a `with` statement.
#[derive(Debug, Clone)]
pub struct WithItem {
    /// The context expression.
    pub context: Expr,
    /// The `as` target.
    pub target: Option<Expr>,
}

/// The statement kinds.
#[derive(Debug, Clone)]
pub enum StmtKind {
    /// An expression evaluated for its effect.
    Expr(Expr),
    /// `targets... = value` (chained targets all receive `value`).
    Assign {
        /// Assignment targets.
        targets: Vec<Expr>,
        /// Assigned value.
        value: Box<Expr>,
        /// The declared type (`x: T = v`, `let x: T = v`): evidence of
        /// what the value is. A type is not evaluated code: walks over
        /// expressions do not visit it.
        annotation: Option<Box<Expr>>,
    },
    /// A declaration without a value: `x: T` (Python), `let x;` /
    /// `let x: T;` (Rust). Nothing is evaluated.
    Declare {
        /// The declared name or pattern.
        target: Box<Expr>,
        /// The declared type.
        annotation: Option<Box<Expr>>,
    },
    /// `target op= value`.
    AugAssign {
        /// Target.
        target: Box<Expr>,
        /// Operator.
        op: BinOp,
        /// Right-hand side.
        value: Box<Expr>,
    },
    /// `for target in iter: body else: orelse`.
    For {
        /// Loop variable(s).
        target: Box<Expr>,
        /// Iterated expression.
        iter: Box<Expr>,
        /// Loop body.
        body: Vec<Stmt>,
        /// `else` block.
        orelse: Vec<Stmt>,
    },
    /// `while test: body else: orelse`.
    While {
        /// Condition.
        test: Box<Expr>,
        /// Loop body.
        body: Vec<Stmt>,
        /// `else` block.
        orelse: Vec<Stmt>,
    },
    /// `if test: body else: orelse` (an `elif` chain nests in `orelse`).
    If {
        /// Condition.
        test: Box<Expr>,
        /// Then block.
        body: Vec<Stmt>,
        /// Else block.
        orelse: Vec<Stmt>,
    },
    /// `with items: body`.
    With {
        /// Context managers in order.
        items: Vec<WithItem>,
        /// Body.
        body: Vec<Stmt>,
    },
    /// A function definition.
    Function(Box<Function>),
    /// A class definition.
    Class(Box<Class>),
    /// `return value`.
    Return(Option<Expr>),
    /// `del targets`.
    Delete(Vec<Expr>),
    /// `import ...` / `from ... import ...`.
    Import(Vec<ImportBinding>),
    /// A block that runs in sequence (e.g. the cases of a `match`).
    Block(Vec<Stmt>),
    /// `try: body except ...: handlers else: orelse finally: finalbody`.
    Try(Box<Try>),
    /// `break`.
    Break,
    /// `continue`.
    Continue,
    /// `raise exc from cause`.
    Raise(Vec<Expr>),
    /// Anything else; its sub-expressions are still visited.
    Other(Vec<Expr>),
}

/// Literal values.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// An integer that fits in i64.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string of at most 64 bytes (frontends lower longer ones, messages
    /// and templates, as `Other`).
    Str(Ident),
    /// `True` / `False`.
    Bool(bool),
    /// `None`.
    None,
    /// Any other literal (bytes, ellipsis, big ints, f-strings, long strings).
    Other,
}

/// A keyword argument.
#[derive(Debug, Clone)]
pub struct Keyword {
    /// The name; `None` for `**kwargs`.
    pub name: Option<Ident>,
    /// The value.
    pub value: Expr,
}

/// An expression.
#[derive(Debug, Clone)]
pub struct Expr {
    /// Source span.
    pub span: Span,
    /// Its identity in the module ([`ExprId::DETACHED`] until
    /// [`Module::new`] numbers it, and for expressions built by a query).
    pub id: ExprId,
    /// What the expression is.
    pub kind: ExprKind,
}

/// The expression kinds.
#[derive(Debug, Clone)]
pub enum ExprKind {
    /// A bare name.
    Name(Ident),
    /// `value.attr`.
    Attribute {
        /// The object.
        value: Box<Expr>,
        /// Attribute name.
        attr: Ident,
        /// Span of the attribute name.
        attr_span: Span,
    },
    /// `func(args..., keywords...)`.
    Call {
        /// Callee.
        func: Box<Expr>,
        /// Positional arguments.
        args: Box<[Expr]>,
        /// Keyword arguments.
        keywords: Box<[Keyword]>,
        /// Where the argument list starts (its `(`); it ends where the
        /// call does ([`Expr::args_span`]). An offset, not a span, keeps
        /// the call variant, the largest, and so every expression, small.
        args_start: u32,
    },
    /// `value[index]`.
    Subscript {
        /// The subscripted object.
        value: Box<Expr>,
        /// The index expression (a `Tuple` for `a[i, j]`).
        index: Box<Expr>,
    },
    /// `lower:upper:step` inside a subscript.
    Slice {
        /// Lower bound.
        lower: Option<Box<Expr>>,
        /// Upper bound.
        upper: Option<Box<Expr>>,
        /// Step.
        step: Option<Box<Expr>>,
    },
    /// `left op right`.
    BinOp {
        /// Left operand.
        left: Box<Expr>,
        /// Operator.
        op: BinOp,
        /// Right operand.
        right: Box<Expr>,
    },
    /// A unary operator (`-x`, `not x`, `&x`, `*x`).
    Unary {
        /// Which operator.
        op: UnaryOp,
        /// The operand.
        operand: Box<Expr>,
    },
    /// A literal.
    Literal(Literal),
    /// A tuple, list or set display.
    Sequence(Vec<Expr>),
    /// A dict display.
    Dict(Vec<(Option<Expr>, Expr)>),
    /// `*value` / `**value`.
    Starred(Box<Expr>),
    /// A comprehension or other construct with its own scope; its
    /// sub-expressions are visited but bind nothing outside.
    Nested(Vec<Expr>),
    /// A closure: `lambda params: body` (Python), `|params| body` (Rust).
    Closure(Box<Closure>),
    /// A comprehension (`[elt for target in iter if cond]`, generator,
    /// set and dict comprehensions): its targets bind in its own scope.
    Comprehension(Box<Comprehension>),
    /// A block with a value: `{ stmts; tail }` (Rust; also `unsafe { }`).
    Block(Box<Block>),
    /// `value?` (Rust): the value, or an early return of its error.
    Try(Box<Expr>),
    /// `value as Type` (Rust).
    Cast {
        /// The converted value.
        value: Box<Expr>,
        /// The target type, as a type expression.
        ty: Box<Expr>,
    },
    /// `start..end`, `start..=end` (Rust); either bound may be absent.
    Range {
        /// Lower bound.
        start: Option<Box<Expr>>,
        /// Upper bound.
        end: Option<Box<Expr>>,
        /// `..=`.
        inclusive: bool,
    },
    /// A struct literal `Path { field: value, ..rest }` (Rust).
    Struct(Box<StructLit>),
    /// A macro call `path!(...)` (Rust).
    Macro(Box<MacroCall>),
    /// `left op1 c1 op2 c2 ...`.
    Compare {
        /// Leftmost operand.
        left: Box<Expr>,
        /// Operators, one per comparator.
        ops: Box<[CmpOp]>,
        /// The right-hand operands.
        comparators: Box<[Expr]>,
    },
    /// `a and b`, `a or b or c`.
    BoolOp {
        /// The operator.
        op: BoolOpKind,
        /// Operands in order.
        values: Box<[Expr]>,
    },
    /// `body if test else orelse`.
    IfExp {
        /// Condition.
        test: Box<Expr>,
        /// Value when true.
        body: Box<Expr>,
        /// Value when false.
        orelse: Box<Expr>,
    },
    /// `target := value`.
    Named {
        /// The bound name.
        target: Box<Expr>,
        /// The value.
        value: Box<Expr>,
    },
    /// `yield value` / `yield from value`.
    Yield(Option<Box<Expr>>),
    /// Any other expression (await, f-strings); sub-expressions are kept.
    Other(Vec<Expr>),
}

impl Expr {
    /// An expression not yet numbered ([`ExprId::DETACHED`]).
    pub fn new(span: Span, kind: ExprKind) -> Expr {
        Expr { span, id: ExprId::DETACHED, kind }
    }

    /// The name if this is a bare name.
    pub fn as_name(&self) -> Option<&str> {
        match &self.kind {
            ExprKind::Name(n) => Some(n),
            _ => None,
        }
    }

    /// The callee, positional args and keywords if this is a call.
    pub fn as_call(&self) -> Option<(&Expr, &[Expr], &[Keyword])> {
        match &self.kind {
            ExprKind::Call { func, args, keywords, .. } => Some((func, args, keywords)),
            _ => None,
        }
    }

    /// The span of a call's argument list, parentheses included.
    pub fn args_span(&self) -> Option<Span> {
        match &self.kind {
            ExprKind::Call { args_start, .. } => Some(Span::new(*args_start, self.span.end)),
            _ => None,
        }
    }

    /// `(receiver, method)` if this is a call of `receiver.method(...)`.
    pub fn as_method_call(&self) -> Option<(&Expr, &str)> {
        let (func, _, _) = self.as_call()?;
        match &func.kind {
            ExprKind::Attribute { value, attr, .. } => Some((value, attr)),
            _ => None,
        }
    }

    /// The dotted path of a name or attribute chain: `self.model.fc` -> `"self.model.fc"`.
    pub fn dotted(&self) -> Option<Ident> {
        // Inline up to 24 bytes (most paths): the walk asks this of most
        // names and attributes it meets, mostly to look it up.
        let (root, len) = self.dotted_root()?;
        let mut out = Ident::with_capacity(len);
        out.push_str(root);
        self.push_attrs_ident(&mut out);
        Some(out)
    }

    /// [`Expr::push_attrs`] into an identifier.
    fn push_attrs_ident(&self, out: &mut Ident) {
        if let ExprKind::Attribute { value, attr, .. } = &self.kind {
            value.push_attrs_ident(out);
            out.push('.');
            out.push_str(attr);
        }
    }

    /// The root name of a name or attribute chain and the length of its
    /// dotted path.
    pub fn dotted_root(&self) -> Option<(&str, usize)> {
        let mut cur = self;
        let mut len = 0;
        loop {
            match &cur.kind {
                ExprKind::Name(n) => return Some((n, len + n.len())),
                ExprKind::Attribute { value, attr, .. } => {
                    len += attr.len() + 1;
                    cur = value;
                }
                _ => return None,
            }
        }
    }

    /// Appends `.attr` for each attribute of the chain, outermost last.
    fn push_attrs(&self, out: &mut String) {
        if let ExprKind::Attribute { value, attr, .. } = &self.kind {
            value.push_attrs(out);
            out.push('.');
            out.push_str(attr);
        }
    }

    /// `prefix` followed by the chain's attributes (`torch.nn` + `.Linear`
    /// for `nn.Linear` when `nn` is `torch.nn`), in one allocation; `None`
    /// unless this is a name or attribute chain.
    pub fn dotted_with_root(&self, prefix: &str) -> Option<String> {
        let (root, len) = self.dotted_root()?;
        let mut out = String::with_capacity(len - root.len() + prefix.len());
        out.push_str(prefix);
        self.push_attrs(&mut out);
        Some(out)
    }

    /// Whether this assignment target binds `dotted`: the target itself, or
    /// an element of a tuple/list target (`model, optimizer = ...`,
    /// `*rest, last = ...`).
    pub fn binds(&self, dotted: &str) -> bool {
        match &self.kind {
            ExprKind::Sequence(items) => items.iter().any(|i| i.binds(dotted)),
            ExprKind::Starred(i) => i.binds(dotted),
            _ => self.dotted().as_deref() == Some(dotted),
        }
    }

    /// The value of a keyword argument of this call, if present.
    pub fn keyword(&self, name: &str) -> Option<&Expr> {
        let (_, _, kws) = self.as_call()?;
        kws.iter().find(|k| k.name.as_deref() == Some(name)).map(|k| &k.value)
    }

    /// Whether this is the literal `True`.
    pub fn is_true(&self) -> bool {
        matches!(self.kind, ExprKind::Literal(Literal::Bool(true)))
    }

    /// Whether this is the literal `False`.
    pub fn is_false(&self) -> bool {
        matches!(self.kind, ExprKind::Literal(Literal::Bool(false)))
    }

    /// Whether this is the literal `None`.
    pub fn is_none(&self) -> bool {
        matches!(self.kind, ExprKind::Literal(Literal::None))
    }
}


impl Stmt {
    /// A statement not yet numbered ([`StmtId::DETACHED`]).
    pub fn new(span: Span, kind: StmtKind) -> Stmt {
        Stmt { span, id: StmtId::DETACHED, kind }
    }
}
