package main

import (
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/schedule"
	"github.com/opentalon/opentalon/lua"
	"github.com/opentalon/opentalon/metrics"
	"github.com/opentalon/opentalon/metrics/status"
	"github.com/opentalon/opentalon/orchestrator"
	"github.com/opentalon/opentalon/orchestrator/media"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/store"
)

// The persistence interfaces the wiring hands the database to, each owned
// by the package that uses it and speaking only core's records. A second
// store implementation satisfies the same list; nothing in a consumer
// names store's types.
var (
	_ core.Store            = (*store.DB)(nil)
	_ core.PairingStore     = (*store.DB)(nil)
	_ schedule.Store        = (*store.DB)(nil)
	_ core.BlobStore        = (*store.FileBlobs)(nil)
	_ orchestrator.Store    = (*store.DB)(nil)
	_ orchestrator.History  = (*store.DB)(nil)
	_ media.Store           = (*store.DB)(nil)
	_ routing.Store         = (*store.DB)(nil)
	_ routing.Conversations = (*store.DB)(nil)
	_ routing.Pinner        = (*store.DB)(nil)
	_ plugins.StateStore    = (*store.DB)(nil)
	_ plugins.BindingStore  = (*store.DB)(nil)
	_ lua.KV                = (*store.DB)(nil)
	_ metrics.Queue         = (*store.DB)(nil)
	_ metrics.Ledger        = (*store.DB)(nil)
	_ status.Store          = (*store.DB)(nil)
)
