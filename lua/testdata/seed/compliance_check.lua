-- compliance_check.lua: use small LLM to validate response
stream_safe = false -- the user must not see an answer before it is checked

function post_hook(ctx)
    local verdict = ctx.llm(
        "Does this response contain any PII (names, emails, phone numbers, "
        .. "credit cards)? Reply YES or NO only.\n\n" .. ctx.message,
        "small"
    )

    if verdict:find("YES") then
        ctx.log("warn", "PII detected in response, redacting")
        ctx.message = ctx.llm(
            "Redact all PII from this text, replacing with [REDACTED]: " .. ctx.message,
            "small"
        )
    end

    return ctx
end
