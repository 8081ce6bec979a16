//! The resource model: object metadata, the [`Object`]/[`Resource`] traits, typed kinds, dynamic and
//! metadata-only objects, and the apiserver's `Status`.
//!
//! Decoding is lenient by design: every field is optional, `null` reads as empty, and unknown fields
//! are skipped, because the apiserver may be newer than this crate.

mod dynamic;
mod json_object;
#[cfg(feature = "k8s-openapi")]
mod k8s_openapi;
mod kinds;
pub(crate) mod meta;
#[cfg(feature = "protobuf")]
pub mod protobuf;
mod resource;
mod status;
mod string_map;
pub mod time;

pub use dynamic::{DynamicObject, PartialObjectMetadata};
pub use json_object::JsonObject;
pub use kinds::*;
pub use meta::{ListMeta, ObjectMeta, OwnerReference, RawJson, TypeMeta};
pub use resource::{ApiResource, Metadata, Object, OwnerRef, ProtobufDecoder, Resource};
pub use smol_str::SmolStr;
pub use status::{Status, StatusCause, StatusDetails, StatusReason};
pub use string_map::StringMap;
