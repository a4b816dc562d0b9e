-- expert_classify.lua: rule-based request classifier
local rules = {
    { pattern = "create.*ticket",  category = "jira",    priority = "normal" },
    { pattern = "urgent.*bug",     category = "jira",    priority = "critical" },
    { pattern = "deploy.*prod",    category = "devops",  priority = "high" },
    { pattern = "summarize.*code", category = "code",    priority = "normal" },
}

function pre_hook(ctx)
    for _, rule in ipairs(rules) do
        if string.find(ctx.message:lower(), rule.pattern) then
            ctx.metadata["category"] = rule.category
            ctx.metadata["priority"] = rule.priority
            ctx.log("info", "classified as " .. rule.category .. "/" .. rule.priority)
            return ctx
        end
    end
    return ctx
end
