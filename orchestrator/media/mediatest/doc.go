// Package mediatest makes the files tests of the media reader send: PDFs
// with text pages, and PDF bombs (a few hundred KB whose page expands to
// hundreds of MB).
package mediatest
