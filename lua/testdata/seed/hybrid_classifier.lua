-- hybrid_classifier.lua
local known_patterns = {
    { pattern = "password", action = "reject", reason = "contains credential" },
    { pattern = "api[_-]?key", action = "reject", reason = "contains API key" },
}

function pre_hook(ctx)
    -- fast path: deterministic rules first
    for _, rule in ipairs(known_patterns) do
        if string.find(ctx.message:lower(), rule.pattern) then
            if rule.action == "reject" then
                ctx.message = "[blocked: " .. rule.reason .. "]"
                ctx.metadata["blocked"] = "true"
                return ctx
            end
        end
    end

    -- slow path: ambiguous cases go to small LLM
    local risk = ctx.llm(
        "Rate the security risk of this message (LOW/MEDIUM/HIGH): " .. ctx.message,
        "small"
    )

    if risk:find("HIGH") then
        ctx.metadata["security_review"] = "required"
        ctx.log("warn", "high-risk message flagged for review")
    end

    return ctx
end
