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
// "do (concat)() return f(x) end": the concatenation of nothing refuses
// to let the pending tail calls of the run's stack pass maxTailCalls
// (tailCheck), and the return is left as it was. It stays a tail call
// with all of f's values, the call keeps its name in errors ("bad
// argument #1 to rep"), and the check takes no local of the chunk and no
// register the return would not use anyway, so a script close to the 200
// of either loads as it did. A loop that tail-calls a helper does not
// add up (the helper's frame returns); only a tail recursion deeper than
// maxTailCalls fails.

// maxTailCalls bounds the tail calls pending on a run's stack: a
// traceback costs about 50 bytes each (50 MB at the bound, once per
// error), while tail-recursive bombs hit memory_mb 64 long before it.
const maxTailCalls = 1 << 20

// rewriteConcat rewrites every concatenation of chunk into a call of the
// bounded concatenation, checks the pending tail calls before every tail
// call, binds the function first thing, and returns how many tail calls
// it guarded.
func rewriteConcat(chunk []ast.Stmt) ([]ast.Stmt, int) {
	w := &concatWriter{}
	w.stmts(chunk)
	bind := &ast.LocalAssignStmt{Names: []string{concatName}, Exprs: []ast.Expr{&ast.IdentExpr{Value: concatName}}}
	return append([]ast.Stmt{bind}, chunk...), w.tails
}

type concatWriter struct {
	// tails counts the tail calls guarded.
	tails int
}

// isTailCall tells whether gopher-lua compiles r into a tail call: one
// call, not in parentheses.
func isTailCall(r *ast.ReturnStmt) bool {
	if len(r.Exprs) != 1 {
		return false
	}
	call, ok := r.Exprs[0].(*ast.FuncCallExpr)
	return ok && !call.AdjustRet
}

// guardTail returns "do (concat)() return f(x) end" for the tail call
// "return f(x)", on its line.
func (w *concatWriter) guardTail(r *ast.ReturnStmt) ast.Stmt {
	check := &ast.FuncCallExpr{Func: &ast.IdentExpr{Value: concatName}}
	check.SetLine(r.Line())
	check.SetLastLine(r.Line())
	check.Func.(*ast.IdentExpr).SetLine(r.Line())
	call := &ast.FuncCallStmt{Expr: check}
	call.SetLine(r.Line())
	call.SetLastLine(r.Line())
	do := &ast.DoBlockStmt{Stmts: []ast.Stmt{call, r}}
	do.SetLine(r.Line())
	do.SetLastLine(r.LastLine())
	w.tails++
	return do
}

func (w *concatWriter) stmts(ss []ast.Stmt) {
	for i, s := range ss {
		w.stmt(s)
		if r, ok := s.(*ast.ReturnStmt); ok && isTailCall(r) {
			ss[i] = w.guardTail(r)
		}
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
		// No operands: the check before a tail call (guardTail); a
		// concatenation has two at least.
		v.tailCheck(L)
		return 0
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

// tailCheck refuses a tail call past maxTailCalls pending on the stack.
// It looks every tailCheckEvery tail calls of the run (GetStack counts
// the pending ones and walks the real frames only, but allocates).
func (v *vm) tailCheck(L *glua.LState) {
	if r := v.cur; r != nil {
		if r.tails++; r.tails%tailCheckEvery != 0 {
			return
		}
	}
	if _, deep := L.GetStack(maxTailCalls); deep {
		L.RaiseError("more than %d tail calls pending (a tail recursion that does not end?)", maxTailCalls)
	}
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
