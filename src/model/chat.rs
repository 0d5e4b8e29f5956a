//! A model file's chat template (`tokenizer.chat_template`, Jinja as Hugging Face writes it)
//! rendered for a conversation, by `minijinja`.

use alloc::string::{String, ToString};
use core::fmt;

/// One turn of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatMessage<'a> {
    /// `"system"`, `"user"` or `"assistant"`.
    pub role: &'a str,
    /// What was said.
    pub content: &'a str,
}

/// A chat template that does not parse or render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatError(String);

impl fmt::Display for ChatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tokenizer.chat_template: {}", self.0)
    }
}

impl core::error::Error for ChatError {}

/// `messages` rendered by `template`, with the assistant's opening added when
/// `add_generation_prompt` (what a model continues from). The template sees `messages`
/// (each with `role` and `content`) and `add_generation_prompt`, as in Hugging Face's
/// `apply_chat_template`.
///
/// ```
/// use skainet_schedule::model::{render_chat, ChatMessage};
/// let template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}\
///                 {% if add_generation_prompt %}<|assistant|>{% endif %}";
/// let user = ChatMessage { role: "user", content: "Hi" };
/// assert_eq!(render_chat(template, &[user], true).unwrap(), "<|user|>Hi\n<|assistant|>");
/// ```
///
/// # Errors
///
/// [`ChatError`] naming what the template engine refused (a syntax error, an undefined
/// function, a template that raises an exception).
pub fn render_chat(
    template: &str,
    messages: &[ChatMessage<'_>],
    add_generation_prompt: bool,
) -> Result<String, ChatError> {
    let mut env = minijinja::Environment::new();
    env.add_template("chat", template)
        .map_err(|e| ChatError(e.to_string()))?;
    let messages: alloc::vec::Vec<_> = messages
        .iter()
        .map(|m| minijinja::context! { role => m.role, content => m.content })
        .collect();
    env.get_template("chat")
        .and_then(|t| {
            t.render(minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
            })
        })
        .map_err(|e| ChatError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_that_does_not_parse_is_an_error_naming_the_key() {
        let err = render_chat("{% for %}", &[], true).unwrap_err();
        assert!(
            err.to_string().starts_with("tokenizer.chat_template: "),
            "{err}"
        );
    }
}
