-- filter.lua: drop messages containing blocked words
function filter(ctx)
    local blocked = {"spam", "scam"}
    for _, word in ipairs(blocked) do
        if string.find(ctx.message, word) then
            return { drop = true, reason = "blocked word: " .. word }
        end
    end
    return { drop = false }
end
