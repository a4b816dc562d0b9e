-- smart_preprocess.lua: use small LLM to detect language and translate
function pre_hook(ctx)
    -- detect language with a cheap model
    local lang = ctx.llm(
        "What language is this text? Reply with just the ISO code: " .. ctx.message,
        "small"
    )

    -- translate non-English to English before the main LLM
    if lang ~= "en" then
        ctx.metadata["original_language"] = lang
        ctx.message = ctx.llm(
            "Translate to English: " .. ctx.message,
            "small"
        )
    end

    return ctx
end
