package lua

import (
	"fmt"
	"strings"

	"github.com/yuin/gopher-lua/ast"

	glua "github.com/yuin/gopher-lua"
)

// The concatenation operator. gopher-lua joins a .. b .. c in one
// instruction that builds its result in one allocation no limit sees, so
// a loop doubling a string (s = s .. s) reached 512 MB between two looks
// of the watchdog. Before a script is compiled, every concatenation
// expression is rewritten into a call of concatFn with its operands: it
// joins them as the VM would (the same numbers' formatting, __concat
// metamethods from the right), refuses a result longer than the string
// limit and reserves the memory first (memory.go). The function is bound
// to a local of the chunk whose name is not a Lua name, so no script can
// name, shadow or replace it.

// concatName is the global the sandbox keeps the function in, and the
// local each chunk binds it to.
const concatName = "(concat)"

// Tail calls. gopher-lua counts the tail calls a frame made, and the
// traceback it builds for every error (each pcall's too) first lists one
// line per pending tail call and then keeps 20: after a tail-recursive
// loop of 30 million calls, the error that ended it (the timeout, or an
// error inside pcall) allocated a gigabyte in one Go call, past every
// limit. So the rewrite also turns "return f(x)" into
// "return (tailcheck)(f)(x)" (and "return o:m(x)" into
// "return (tailcheck)(o):m(x)"): the call stays a tail call, and
// tailcheck, which returns its argument, first refuses to let the
// pending tail calls of the run's stack pass maxTailCalls. A loop that
// tail-calls a helper does not add up (the helper's frame returns); only
// a tail recursion deeper than maxTailCalls fails.
const tailCheckName = "(tailcheck)"

// maxTailCalls bounds the tail calls pending on a run's stack: a
// traceback costs about 50 bytes each (50 MB at the bound, once per
// error), while tail-recursive bombs hit memory_mb 64 long before it.
const maxTailCalls = 1 << 20

// rewriteConcat rewrites every concatenation of chunk into a call of the
// bounded concatenation and guards every tail call (tailCheckName), binds
// both functions first thing, and returns how many tail calls it guarded.
func rewriteConcat(chunk []ast.Stmt) ([]ast.Stmt, int) {
	w := &concatWriter{}
	w.stmts(chunk)
	bind := &ast.LocalAssignStmt{Names: []string{concatName, tailCheckName}, Exprs: []ast.Expr{&ast.IdentExpr{Value: concatName}, &ast.IdentExpr{Value: tailCheckName}}}
	return append([]ast.Stmt{bind}, chunk...), w.tails
}

type concatWriter struct {
	// tails counts the tail calls guarded.
	tails int
}

// guardTail makes the tail call "return call" check the pending tail
// calls first: tailcheck wraps the function (or the receiver of a method
// call), which is evaluated before the arguments.
func (w *concatWriter) guardTail(call *ast.FuncCallExpr) {
	wrap := func(e ast.Expr) ast.Expr {
		c := &ast.FuncCallExpr{Func: &ast.IdentExpr{Value: tailCheckName}, Args: []ast.Expr{e}, AdjustRet: true}
		c.SetLine(call.Line())
		c.SetLastLine(call.LastLine())
		c.Func.(*ast.IdentExpr).SetLine(call.Line())
		return c
	}
	if call.Receiver != nil {
		call.Receiver = wrap(call.Receiver)
	} else {
		call.Func = wrap(call.Func)
	}
	w.tails++
}

func (w *concatWriter) stmts(ss []ast.Stmt) {
	for _, s := range ss {
		w.stmt(s)
	}
}

func (w *concatWriter) exprs(es []ast.Expr) {
	for i := range es {
		es[i] = w.expr(es[i])
	}
}

func (w *concatWriter) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.AssignStmt:
		w.exprs(s.Lhs)
		w.exprs(s.Rhs)
	case *ast.LocalAssignStmt:
		w.exprs(s.Exprs)
	case *ast.FuncCallStmt:
		s.Expr = w.expr(s.Expr)
	case *ast.DoBlockStmt:
		w.stmts(s.Stmts)
	case *ast.WhileStmt:
		s.Condition = w.expr(s.Condition)
		w.stmts(s.Stmts)
	case *ast.RepeatStmt:
		s.Condition = w.expr(s.Condition)
		w.stmts(s.Stmts)
	case *ast.IfStmt:
		s.Condition = w.expr(s.Condition)
		w.stmts(s.Then)
		w.stmts(s.Else)
	case *ast.NumberForStmt:
		s.Init, s.Limit = w.expr(s.Init), w.expr(s.Limit)
		if s.Step != nil {
			s.Step = w.expr(s.Step)
		}
		w.stmts(s.Stmts)
	case *ast.GenericForStmt:
		w.exprs(s.Exprs)
		w.stmts(s.Stmts)
	case *ast.FuncDefStmt:
		if s.Name != nil {
			s.Name.Func = w.expr(s.Name.Func)
			if s.Name.Receiver != nil {
				s.Name.Receiver = w.expr(s.Name.Receiver)
			}
		}
		w.expr(s.Func)
	case *ast.ReturnStmt:
		w.exprs(s.Exprs)
		if len(s.Exprs) == 1 {
			if call, ok := s.Exprs[0].(*ast.FuncCallExpr); ok && !call.AdjustRet {
				w.guardTail(call)
			}
		}
	}
}

// expr returns e with its concatenations rewritten.
func (w *concatWriter) expr(e ast.Expr) ast.Expr {
	switch e := e.(type) {
	case nil:
		return nil
	case *ast.StringConcatOpExpr:
		// a .. b .. c parses as a .. (b .. c): one call takes them all.
		var args []ast.Expr
		var cur ast.Expr = e
		for {
			c, ok := cur.(*ast.StringConcatOpExpr)
			if !ok {
				break
			}
			args = append(args, w.single(c.Lhs))
			cur = c.Rhs
		}
		args = append(args, w.single(cur))
		call := &ast.FuncCallExpr{Func: &ast.IdentExpr{Value: concatName}, Args: args, AdjustRet: true}
		call.SetLine(e.Line())
		call.SetLastLine(e.LastLine())
		call.Func.(*ast.IdentExpr).SetLine(e.Line())
		return call
	case *ast.AttrGetExpr:
		e.Object, e.Key = w.expr(e.Object), w.expr(e.Key)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			if f.Key != nil {
				f.Key = w.expr(f.Key)
			}
			f.Value = w.expr(f.Value)
		}
	case *ast.FuncCallExpr:
		if e.Func != nil {
			e.Func = w.expr(e.Func)
		}
		if e.Receiver != nil {
			e.Receiver = w.expr(e.Receiver)
		}
		w.exprs(e.Args)
	case *ast.LogicalOpExpr:
		e.Lhs, e.Rhs = w.expr(e.Lhs), w.expr(e.Rhs)
	case *ast.RelationalOpExpr:
		e.Lhs, e.Rhs = w.expr(e.Lhs), w.expr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		e.Lhs, e.Rhs = w.expr(e.Lhs), w.expr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		e.Expr = w.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		e.Expr = w.expr(e.Expr)
	case *ast.UnaryLenOpExpr:
		e.Expr = w.expr(e.Expr)
	case *ast.FunctionExpr:
		w.stmts(e.Stmts)
	}
	return e
}

// single rewrites one operand; a call or ... in it gives one value, as
// it does as an operand of ..
func (w *concatWriter) single(e ast.Expr) ast.Expr {
	e = w.expr(e)
	switch x := e.(type) {
	case *ast.FuncCallExpr:
		x.AdjustRet = true
	case *ast.Comma3Expr:
		x.AdjustRet = true
	}
	return e
}

// concat is the concatenation operator within the string limit, with the
// memory reserved before the result is built.
func (v *vm) concat(L *glua.LState) int {
	n := L.GetTop()
	if n == 0 {
		L.Push(glua.LString(""))
		return 1
	}
	// Strings and numbers only (the usual case): one join.
	size, plain := 0, true
	for i := 1; i <= n && plain; i++ {
		switch x := L.Get(i).(type) {
		case glua.LString:
			size += len(x)
		case glua.LNumber:
			size += len(x.String())
		default:
			plain = false
		}
	}
	if plain {
		v.checkString(L, size)
		var b strings.Builder
		b.Grow(size)
		for i := 1; i <= n; i++ {
			b.WriteString(glua.LVAsString(L.Get(i)))
		}
		L.Push(glua.LString(b.String()))
		return 1
	}
	// As the VM does: from the right, two at a time, a __concat
	// metamethod for an operand that is not a string or a number.
	rhs := L.Get(n)
	for i := n - 1; i >= 1; i-- {
		lhs := L.Get(i)
		if glua.LVCanConvToString(lhs) && glua.LVCanConvToString(rhs) {
			l, r := glua.LVAsString(lhs), glua.LVAsString(rhs)
			v.checkString(L, len(l)+len(r))
			rhs = glua.LString(l + r)
			continue
		}
		mm := L.GetMetaField(lhs, "__concat")
		if mm == glua.LNil {
			mm = L.GetMetaField(rhs, "__concat")
		}
		if mm.Type() != glua.LTFunction {
			L.RaiseError("cannot perform concat operation between %s and %s", lhs.Type().String(), rhs.Type().String())
		}
		L.Push(mm)
		L.Push(lhs)
		L.Push(rhs)
		L.Call(2, 1)
		rhs = L.Get(-1)
		L.Pop(1)
	}
	L.Push(rhs)
	return 1
}

// tailCheck is (tailcheck): it returns its argument, after refusing a
// tail call past maxTailCalls pending on the stack. It looks every
// tailCheckEvery tail calls of the run (GetStack counts the pending ones
// and walks the real frames only, but allocates).
func (v *vm) tailCheck(L *glua.LState) int {
	if r := v.cur; r != nil {
		if r.tails++; r.tails%tailCheckEvery != 0 {
			return 1
		}
	}
	if _, deep := L.GetStack(maxTailCalls); deep {
		L.RaiseError("more than %d tail calls pending (a tail recursion that does not end?)", maxTailCalls)
	}
	return 1
}

// tailCheckEvery is how many tail calls run between two looks at the
// pending ones.
const tailCheckEvery = 1024

// checkString refuses a string of size bytes past the string limit, and
// reserves its memory.
func (v *vm) checkString(L *glua.LState, size int) {
	if size > v.maxString {
		L.RaiseError("%s", fmt.Sprintf("a concatenation of %d bytes exceeds the string limit of %d bytes (plugins.lua.limits.memory_mb)", size, v.maxString))
	}
	v.reserve(L, size)
}
