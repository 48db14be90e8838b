"""The registers of the emitted pipelined loops and the logic between them, read from the generated C++.

A pipelined loop reaches II=1 at the clock it is synthesized for only if every value carried from one
iteration to the next (a register: a variable declared before the loop and assigned in it, and the
loop's own counter) gets its next value within one cycle. The emitted code keeps that logic short by
construction; this module measures it:

* `pipelined_loops(source)` finds every function's loop with a `HLS_PRAGMA(PIPELINE` line, its
  registers (name, declared type, declaration line) and its body;
* `cursor_loop(source)` reads the position machine of the sliding-window processes (ming_window.h) the
  same way: its registers are the class's members and its body is `next()`; a loop that declares a
  cursor reads its members as registers;
* `register_chains(loop)` executes the body symbolically, following every value from the registers
  read at the iteration's start to the registers' next values, and counts the operators on the longest
  path of each class: `add` (+, -, ++, --, +=, -=), `compare` (==, !=, <, <=, >, >=), `logic` (a
  boolean combination: any tree of &&, || and !), `select` (a multiplexer: any tree of ?: and of the
  if/else branches assigning a variable, whatever their nesting) and `other` (multiplications,
  divisions, shifts, bitwise operators, array and stream reads, function calls).

The rule (`CHAIN_LIMIT`): between a register read and a register write stand at most one add, one
compare, one boolean combination and one select, and nothing else. A counter's next value is its
increment or a constant, chosen by predicates that compare registers with constants. A value updated
earlier in the iteration and read again later brings its own chain along, so whatever the next
iteration needs is computed from this iteration's registers: one iteration ahead.

Constants (literals, constexpr names, the indices of unrolled loops) cost nothing, nor does arithmetic
among them; an if/else or ?: chosen by a constant is no multiplexer, and a bitwise and with a constant (a
mask: each bit kept or zero) is wiring.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CLASSES = ("add", "compare", "logic", "select", "other")
CHAIN_LIMIT = {"add": 1, "compare": 1, "logic": 1, "select": 1, "other": 0}
# What a register may be declared as: a predicate, or an unsigned integer of the width of its range.
REGISTER_TYPE = re.compile(r"bool|(?:ming::)?(?:uint_for|Counter)<.+>")
# An object of registers a loop may declare (its members checked on their own by `cursor_loop`).
CURSOR_TYPE = re.compile(r"(?:ming::)?WindowCursor<.+>")

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
  | (?P<number>\d[\w.]*)
  | (?P<name>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)
  | (?P<op><<=|>>=|->|\+\+|--|&&|\|\||==|!=|<=|>=|<<|>>|[-+*/%&|^]=|[-+*/%<>=!~&|^?:;,.(){}\[\]\#])
""", re.X | re.S)


@dataclass(frozen=True)
class Token:
    text: str
    kind: str  # "number", "name", "string" or "op"
    line: int


def tokenize(text: str) -> list[Token]:
    tokens, line, at = [], 1, 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise ValueError(f"line {line}: cannot read {text[at:at + 20]!r}")
        if match.lastgroup not in ("space", "comment"):
            tokens.append(Token(match.group(), match.lastgroup, line))
        line += match.group().count("\n")
        at = match.end()
    return tokens


# ---------------------------------------------------------------------------------------------------
# Values: the longest chain of each operator class from a register to the value.

@dataclass(frozen=True, eq=False)
class Value:
    cost: tuple[int, ...] = (0,) * len(CLASSES)
    top: str = ""  # the class of the operator computing it; "" for a register or a constant
    constant: bool = False
    offset: bool = False  # a value plus a constant: adding another constant is the same adder


def constant() -> Value:
    """A constant: each a value of its own (a variable keeps its value object until it is assigned)."""
    return Value(constant=True)


def operator(kind: str, operands: list[Value], joins: tuple[Value, ...] = (), folds: bool = True) -> Value:
    """An operator of class `kind`: one more of its class on every path from its operands, except from the
    operands in `joins` computed by an operator of the same class (which it extends: a tree of boolean
    operators, or of multiplexers, is one of them). Constants fold unless `folds` is false (a stream read)."""
    varying = [v for v in operands if not v.constant]
    if not varying and folds:
        return constant()
    if kind == "add" and len(varying) == 1 and len(operands) == 2:
        if varying[0].offset:
            return varying[0]
        cost = list(varying[0].cost)
        cost[CLASSES.index("add")] += 1
        return Value(tuple(cost), "add", offset=True)
    index = CLASSES.index(kind)
    cost = [0] * len(CLASSES)
    cost[index] = 1
    for v in varying:
        own = list(v.cost)
        if not (v.top == kind and any(v is j for j in joins)):
            own[index] += 1
        cost = [max(a, b) for a, b in zip(cost, own)]
    return Value(tuple(cost), kind)


def select(condition: Value, a: Value, b: Value) -> Value:
    """`condition ? a : b`, or a variable assigned in an if/else."""
    if a is b:  # the same variable's value unchanged
        return a
    if condition.constant:  # chosen at compile time: no multiplexer
        return a if a.constant and b.constant else Value(tuple(map(max, a.cost, b.cost)), a.top or b.top)
    return operator("select", [condition, a, b], joins=(a, b))


# ---------------------------------------------------------------------------------------------------
# The emitted C++: statements and expressions of the subset the templates write.

_QUALIFIERS = ("const", "constexpr", "static")
_BINARY = {
    "||": (1, "logic"), "&&": (2, "logic"), "|": (3, "other"), "^": (4, "other"), "&": (5, "other"),
    "==": (6, "compare"), "!=": (6, "compare"), "<": (7, "compare"), "<=": (7, "compare"), ">": (7, "compare"),
    ">=": (7, "compare"), "<<": (8, "other"), ">>": (8, "other"), "+": (9, "add"), "-": (9, "add"),
    "*": (10, "other"), "/": (10, "other"), "%": (10, "other"),
}
_ASSIGNMENTS = {"=": None, "+=": "add", "-=": "add", "*=": "other", "/=": "other", "%=": "other", "&=": "other",
                "|=": "other", "^=": "other", "<<=": "other", ">>=": "other"}


def datapath() -> Value:
    """An array's element, a structure's member, a stream's token: what the datapath computes."""
    return Value((0, 0, 0, 0, 1), "other")


@dataclass
class Declarator:
    name: str
    type: str
    line: int
    array: bool


class Parser:
    """Statements and expressions over a list of tokens, evaluated into `Value`s: `env` holds each
    variable's value so far, the registers' starting as themselves."""

    def __init__(self, tokens: list[Token], registers=(), cursors=()):
        self.tokens = tokens
        self.at = 0
        self.cursors = set(cursors)  # objects whose members are registers
        self.env: dict[str, Value] = {name: Value() for name in registers}

    def peek(self, offset: int = 0) -> str:
        i = self.at + offset
        return self.tokens[i].text if i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> Token:
        if self.at >= len(self.tokens) or (expected is not None and self.tokens[self.at].text != expected):
            found = self.tokens[self.at] if self.at < len(self.tokens) else None
            raise ValueError(f"expected {expected!r}, found {found.text if found else 'the end'!r}"
                             f" at line {found.line if found else '?'}")
        self.at += 1
        return self.tokens[self.at - 1]

    def balanced(self, opening: str, closing: str) -> list[Token]:
        """The tokens between `opening` (the next token) and its matching `closing`, which are taken."""
        self.take(opening)
        depth, start = 1, self.at
        while depth:
            text = self.take().text
            depth += (text == opening) - (text == closing)
        return self.tokens[start:self.at - 1]

    def template_arguments_ahead(self) -> bool:
        """The `<` ahead opens template arguments (names, numbers and arithmetic in balanced parentheses up to
        its `>`), followed by a call's `(` or a member's `::`."""
        angles = parentheses = 0
        for i in range(self.at, len(self.tokens)):
            text = self.tokens[i].text
            angles += (text == "<") - (text == ">") - 2 * (text == ">>")
            parentheses += (text == "(") - (text == ")")
            if parentheses < 0 or text in ("{", "}", ";", "[", "]", "=", "&&", "||", "?"):
                return False
            if angles <= 0:
                after = self.tokens[i + 1].text if i + 1 < len(self.tokens) else ""
                return parentheses == 0 and after in ("(", ":")
        return False

    def angles(self) -> None:
        depth = 0
        while True:
            text = self.take().text
            depth += (text == "<") - (text == ">") - 2 * (text == ">>")
            if depth <= 0:
                return

    # statements
    def statements(self) -> None:
        while self.at < len(self.tokens) and self.peek() != "}":
            self.statement()

    def statement(self) -> None:
        text = self.peek()
        if text == "{":
            self.take("{")
            self.statements()
            self.take("}")
        elif text == ";":
            self.take(";")
        elif text == "HLS_PRAGMA":
            self.take()
            self.balanced("(", ")")
        elif self.tokens[self.at].kind == "name" and self.peek(1) == ":":
            self.take()
            self.take(":")  # a label
        elif text == "if":
            self.if_statement()
        elif text == "for":
            self.unrolled_for()
        elif self.declaration_ahead():
            self.declaration()
        else:
            self.expression()
            self.take(";")

    def branch(self, before: dict[str, Value]) -> dict[str, Value]:
        self.env = dict(before)
        self.statement()
        return self.env

    def if_statement(self) -> None:
        self.take("if")
        self.take("(")
        condition = self.expression()
        self.take(")")
        before = self.env
        then = self.branch(before)
        otherwise = before
        if self.peek() == "else":
            self.take("else")
            otherwise = self.branch(before)
        self.env = {name: select(condition, then[name], otherwise[name]) for name in before}

    def unrolled_for(self) -> None:
        """A loop inside the pipelined one is unrolled: its index is a constant of each copy, and two copies
        show what the copies chain."""
        self.take("for")
        self.take("(")
        index = self.declaration()[0].name
        while self.peek() != ";":
            self.take()
        self.take(";")
        depth = 1
        while depth:
            text = self.take().text
            depth += (text == "(") - (text == ")")
        body = self.at
        for _ in range(2):
            self.at = body
            self.env[index] = constant()
            self.statement()
        self.env.pop(index)

    def declaration_ahead(self) -> bool:
        """A declaration starts with a type, (const) name (<...>), and a declarator's name: two names in a row
        start no expression."""
        saved = self.at
        try:
            while self.peek() in _QUALIFIERS:
                self.take()
            if self.tokens[self.at].kind != "name":
                return False
            self.take()
            if self.peek() == "<":
                self.angles()
            return self.at < len(self.tokens) and self.tokens[self.at].kind == "name"
        except ValueError:
            return False
        finally:
            self.at = saved

    def declaration(self) -> list[Declarator]:
        """A declaration up to its `;`: each declarator's name gets its initial value."""
        start = self.at
        while self.peek() in _QUALIFIERS:
            self.take()
        self.take()
        if self.peek() == "<":
            self.angles()
        declared_type = " ".join(t.text for t in self.tokens[start:self.at])
        declared_type = re.sub(r"\s*([<>()])\s*", r"\1", declared_type)
        declared = []
        while True:
            name = self.take()
            array = self.peek() == "["
            while self.peek() == "[":
                self.balanced("[", "]")
            if self.peek() == "=":
                self.take("=")
            if self.peek() == "{":
                self.balanced("{", "}")
                value = datapath() if array else constant()
            elif self.peek() in (",", ";"):
                value = datapath()  # assigned later, a structure or an array
            else:
                value = datapath() if array else self.expression()
            self.env[name.text] = value
            declared.append(Declarator(name.text, declared_type, name.line, array))
            if self.peek() != ",":
                break
            self.take(",")
        self.take(";")
        return declared

    # expressions
    def expression(self) -> Value:
        """An assignment expression: a variable's assignment is followed, an element's or member's is not
        (arrays and structures are the datapath)."""
        start = self.at
        target = self.assigned_variable()
        if target is not None:
            kind = _ASSIGNMENTS[self.take().text]
            value = self.expression()
            if kind is not None:
                value = operator(kind, [self.env.get(target, constant()), value])
            if target in self.env:
                self.env[target] = value
            return value
        self.at = start
        return self.conditional()

    def assigned_variable(self) -> str | None:
        """The variable the assignment starting here writes ("" for an element or a member), else None."""
        if self.tokens[self.at].kind != "name":
            return None
        name = self.take().text
        element = False
        while self.peek() in ("[", "."):
            element = True
            if self.peek() == "[":
                self.balanced("[", "]")
            else:
                self.take(".")
                self.take()
        if self.peek() not in _ASSIGNMENTS:
            return None
        return "" if element else name

    def conditional(self) -> Value:
        condition = self.binary(1)
        if self.peek() != "?":
            return condition
        self.take("?")
        a = self.expression()
        self.take(":")
        b = self.expression()
        return select(condition, a, b)

    def binary(self, level: int) -> Value:
        left = self.unary()
        while self.peek() in _BINARY and _BINARY[self.peek()][0] >= level:
            text = self.take().text
            precedence, kind = _BINARY[text]
            right = self.binary(precedence + 1)
            if text == "&" and (left.constant or right.constant):  # a mask: wiring
                left = right if left.constant else left
                continue
            left = operator(kind, [left, right], joins=(left, right) if kind == "logic" else ())
        return left

    def unary(self) -> Value:
        text = self.peek()
        if text == "!":
            self.take()
            operand = self.unary()
            return operator("logic", [operand], joins=(operand,))
        if text in ("-", "+", "~"):
            self.take()
            operand = self.unary()
            return operand if text == "+" else operator("add" if text == "-" else "other", [operand])
        if text in ("++", "--"):
            self.take()
            name = self.take().text
            self.env[name] = operator("add", [self.env.get(name, constant()), constant()])
            return self.env[name]
        return self.postfix()

    def postfix(self) -> Value:
        value, name = self.primary()
        while True:
            text = self.peek()
            if text == "[":
                self.take("[")
                index = self.expression()
                self.take("]")
                value = operator("other", [value, index])
            elif text == "(":
                value = operator("other", [value, *self.arguments()], folds=False)
            elif text in (".", "->"):
                self.take()
                member = self.take()
                if self.peek() == "(":  # a stream's read or write
                    value = operator("other", [value, *self.arguments()], folds=False)
                elif name in self.cursors:  # a cursor's constant or register
                    value = constant() if member.text.isupper() else Value()
                else:
                    value = datapath()
            elif text in ("++", "--") and name is not None:
                self.take()
                if name in self.env:
                    self.env[name] = operator("add", [value, constant()])
            else:
                return value
            name = None

    def arguments(self) -> list[Value]:
        self.take("(")
        values = []
        while self.peek() != ")":
            values.append(self.expression())
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        return values

    def primary(self) -> tuple[Value, str | None]:
        token = self.take()
        if token.text == "(":
            value = self.expression()
            self.take(")")
            return value, None
        if token.kind in ("number", "string") or token.text in ("true", "false"):
            return constant(), None
        if token.text == "static_cast":
            self.angles()
            self.take("(")
            value = self.expression()
            self.take(")")
            return value, None
        if token.kind == "name":
            if self.peek() == "<" and self.template_arguments_ahead():
                self.angles()  # a function template's arguments, or a class template's member to follow
                if self.peek() == ":" and self.peek(1) == ":":
                    self.take()
                    self.take()
                    self.take()
                    return constant(), None
            return self.env.get(token.text, constant()), token.text
        raise ValueError(f"line {token.line}: unexpected {token.text!r}")


# ---------------------------------------------------------------------------------------------------
# Pipelined loops and their registers.

@dataclass
class PipelinedLoop:
    function: str
    label: str | None
    registers: dict[str, Declarator]  # declared before the loop, assigned in it, and its counter
    counter: str
    step: list[Token]  # the counter's update (none for a cursor's `next()`)
    body: list[Token]  # inside the braces
    cursors: tuple[str, ...] = ()  # the objects it declares whose members are registers (`CURSOR_TYPE`)


def _functions(tokens: list[Token]):
    """(name, body tokens) of every function defined at namespace scope."""
    at = 0
    while at < len(tokens):
        if tokens[at].text == "(" and at and tokens[at - 1].kind == "name":
            parser = Parser(tokens)
            parser.at = at
            parser.balanced("(", ")")
            if parser.peek() == "{":
                body = parser.balanced("{", "}")
                yield tokens[at - 1].text, body
                at = parser.at
                continue
        at += 1


def pipelined_loops(source: str) -> list[PipelinedLoop]:
    """The pipelined loop of every function of `source` that has one (at its top level)."""
    loops = []
    for function, body in _functions(tokenize(source)):
        pragma = next((i for i in range(len(body) - 2)
                       if body[i].text == "HLS_PRAGMA" and body[i + 2].text == "PIPELINE"), None)
        if pragma is None:
            continue
        start = max(i for i in range(pragma) if body[i].text == "for")
        label = body[start - 2].text if start >= 2 and body[start - 1].text == ":" else None
        declared = _scalars(body[:start])
        parser = Parser(body)
        parser.at = start + 1
        header = parser.balanced("(", ")")
        init_end, step_start = [i for i, t in enumerate(header) if t.text == ";"]
        (counter,) = _scalars(header[:init_end + 1]).values()
        loop_body = parser.balanced("{", "}")
        assigned = _assigned_names(loop_body)
        registers = {name: d for name, d in declared.items() if name in assigned}
        registers[counter.name] = counter
        cursors = tuple(name for name, d in declared.items() if CURSOR_TYPE.fullmatch(d.type))
        loops.append(PipelinedLoop(function, label, registers, counter.name, header[step_start + 1:], loop_body,
                                   cursors))
    return loops


_MEMBER = re.compile(r"^  ((?:ming::)?(?:Counter|uint_for)<.+>|bool) (\w+);", re.M)
_INITIALIZER = re.compile(r"^ +(?:: )?(\w+)\(MING_CURSOR_REGISTER\(", re.M)


def cursor_loop(source: str, name: str = "WindowCursor") -> PipelinedLoop:
    """The class `name` of `source` (ming_window.h) as a loop: its data members (declared on lines of their own,
    two spaces in) are its registers and its `next()` the loop's body (less its preprocessor lines: the
    synthesis pragma that inlines it). A counter's line is that of its initializer, where C-simulation reports
    its width (as the line negated, under the process's name)."""
    start = source.index(f"class {name} {{")
    end = source.index("\n};", start)

    def line(at: int) -> int:
        return source.count("\n", 0, at) + 1

    reported = {m.group(1): line(m.start()) for m in _INITIALIZER.finditer(source, start, end)}
    registers = {m.group(2): Declarator(m.group(2), m.group(1), reported.get(m.group(2), line(m.start())), False)
                 for m in _MEMBER.finditer(source, start, end)}
    body = source[source.index("void next() {", start):end]
    tokens = tokenize("\n".join(text for text in body.splitlines() if not text.lstrip().startswith("#")))
    parser = Parser(tokens)
    parser.at = 4  # void next ( )
    return PipelinedLoop(name, "next", registers, "", [], parser.balanced("{", "}"))


def _scalars(tokens: list[Token]) -> dict[str, Declarator]:
    """The scalar variables the top-level statements `tokens` declare (not constants, arrays or tokens)."""
    parser = Parser(tokens)
    found = {}
    while parser.at < len(tokens):
        if parser.peek() == "HLS_PRAGMA":
            parser.take()
            parser.balanced("(", ")")
        elif parser.declaration_ahead():
            for d in parser.declaration():
                if not (d.array or d.type.startswith(("constexpr", "ming::Array", "ming::Pack"))):
                    found[d.name] = d
        else:
            parser.take()
    return found


def _assigned_names(tokens: list[Token]) -> set[str]:
    names = set()
    for i, t in enumerate(tokens):
        after = tokens[i + 1].text if i + 1 < len(tokens) else ""
        before = tokens[i - 1].text if i else ""
        if t.kind == "name" and (after in _ASSIGNMENTS or "++" in (after, before) or "--" in (after, before)):
            names.add(t.text)
    return names


def register_chains(loop: PipelinedLoop) -> dict[str, dict[str, int]]:
    """Each register's longest chain of each operator class, from the registers' values at an iteration's
    start to its value at the next iteration's."""
    body = Parser(loop.body, loop.registers, loop.cursors)
    body.statements()
    step = Parser(loop.step)
    step.env = dict(body.env)
    if loop.step:
        step.expression()
    return {name: dict(zip(CLASSES, step.env[name].cost)) for name in loop.registers}


def excess(chain: dict[str, int]) -> dict[str, int]:
    """The operator classes of a chain beyond `CHAIN_LIMIT`."""
    return {kind: n for kind, n in chain.items() if n > CHAIN_LIMIT[kind]}
