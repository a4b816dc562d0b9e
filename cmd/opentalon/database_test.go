package main

import "testing"

func TestWithoutPassword(t *testing.T) {
	for _, tc := range []struct{ dsn, want, pw string }{
		{"postgres://bot:s3cret@db:5432/ot?sslmode=require", "postgres://bot@db:5432/ot?sslmode=require", "s3cret"},
		{"postgres://bot@db/ot?password=pw2&search_path=ot&pool_max_conns=4", "postgres://bot@db/ot?options=-c%20search_path%3Dot", "pw2"},
		{`host=db user=bot password='it\'s a \\ test' dbname='my db'`, "host=db user=bot dbname='my db'", `it's a \ test`},
		{"host=db user=bot password=plain dbname=ot", "host=db user=bot dbname=ot", "plain"},
		{"host=db dbname=ot", "host=db dbname=ot", ""},
	} {
		got, pw := withoutPassword(tc.dsn)
		if got != tc.want || pw != tc.pw {
			t.Errorf("withoutPassword(%q) = %q, %q; want %q, %q", tc.dsn, got, pw, tc.want, tc.pw)
		}
	}
}
