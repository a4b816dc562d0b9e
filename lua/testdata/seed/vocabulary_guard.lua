-- vocabulary_guard.lua: enforce company terminology
local replacements = {
    ["bug"]       = "defect",
    ["asap"]      = "with high priority",
    ["guys"]      = "team",
    ["this sucks"] = "this needs improvement",
}

function post_hook(ctx)
    local msg = ctx.message
    for informal, formal in pairs(replacements) do
        msg = msg:gsub(informal, formal)
    end
    ctx.message = msg
    return ctx
end
