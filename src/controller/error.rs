//! The controller's refusals: a Kafka error code plus the message Kafka sends with it. Errors are
//! data: a handler returns them in its answer, never panics.

use kafka_protocol::error::ResponseError;

/// A refused command (or part of one): Kafka's error and its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error:?}: {message}")]
pub struct ControllerError {
    pub error: ResponseError,
    pub message: String,
}

impl ControllerError {
    pub fn new(error: ResponseError, message: impl Into<String>) -> Self {
        ControllerError {
            error,
            message: message.into(),
        }
    }
    /// Kafka's numeric error code.
    pub fn code(&self) -> i16 {
        self.error.code()
    }
}

pub(crate) fn err(error: ResponseError, message: impl Into<String>) -> ControllerError {
    ControllerError::new(error, message)
}
