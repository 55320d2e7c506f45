;;; (purple vision): torchvision for Purple -- models whose state dicts match torchvision's, image
;;; files, transforms and datasets. docs/vision.md describes it. The bodies are in vision/, one
;;; idea per file; read-image, write-png, write-jpeg, file->tensor and directory-files are
;;; builtins (builtins/io/). Names starting with vision-- are internal.
(define-library (purple vision)
  (export
   ;; models (vision/resnet, vgg, mobilenet, densenet, efficientnet, vit)
   resnet18 resnet34 resnet50 resnet101
   vgg11 vgg11-bn vgg16 vgg16-bn
   mobilenet-v2 efficientnet-b0 densenet121 vit-b-16
   ;; image files (builtins/io/images.cpp) and grids (vision/grid)
   read-image write-png write-jpeg file->tensor make-grid save-image
   ;; transforms (vision/transforms)
   resize center-crop random-resized-crop horizontal-flip random-horizontal-flip to-float
   normalize normalize-image color-jitter compose
   image-resize image-crop image-center-crop image-hflip image-to-float image-normalize
   image-rgb-to-grayscale image-adjust-brightness image-adjust-contrast image-adjust-saturation
   image-adjust-hue random-resized-crop-params
   ;; datasets (vision/datasets)
   image-folder-dataset image-folder-classes image-folder-samples cifar10-dataset cifar10-classes)
  ;; The builtins (tensors, nn, read-image ...) and the prelude (sequential, make-dataset,
  ;; normalize ...) come from the default environment.
  (import (scheme base))
  (include "vision/layers.purple" "vision/resnet.purple" "vision/vgg.purple" "vision/mobilenet.purple"
           "vision/densenet.purple" "vision/efficientnet.purple" "vision/vit.purple"
           "vision/transforms.purple" "vision/grid.purple" "vision/datasets.purple"))
